import type { Command } from 'commander';
import { stalledInstances, unservedQueues } from '../../store/instance.store.js';
import { MetricsStore } from '../../store/metrics.store.js';
import { formatDuration } from '../duration.js';
import { note, oneLine, print, printJson, printTable, time } from '../output.js';
import type { Run } from '../run.js';

const STALLED_READ_TIMEOUT_MS = 5_000;

export function registerInstances(program: Command, run: Run): void {
  program
    .command('instances')
    .description('the processes that run workers (live, or gone within the last hour), the queues with queued jobs that no live one serves, and live ones that do not claim')
    .option('--json', 'as JSON: { instances: [{ id, host, pid, queues, startedAt, lastSeenAt, live, seenMsAgo }], unserved: [queue], stalled: [{ id, queue, sinceClaimMs, stalledAfterMs }] }')
    .action(
      run(async (connection, _args, options: { json?: boolean }) => {
        const store = connection.jobStore();
        const instances = await store.instances.list();
        const stats = await store.countByStatus();
        const unserved = unservedQueues(Object.keys(stats).filter((q) => stats[q].queued > 0).sort(), instances);
        const oldest = await new MetricsStore(connection.getPool()).oldestDue(STALLED_READ_TIMEOUT_MS);
        const stalled = stalledInstances(Object.keys(oldest).filter((q) => oldest[q] > 0), instances);
        if (options.json) return printJson({ instances, unserved, stalled });
        if (instances.length === 0) note('no process with workers has registered');
        else {
          printTable(
            ['instance', 'host', 'pid', 'queues (running/concurrency)', 'started', 'last seen', 'state'],
            instances.map((i) => [i.id, i.host, String(i.pid), i.queues.map((q) => `${q.queue} ${q.running}/${q.concurrency}`).join(', '), time(i.startedAt), `${formatDuration(i.seenMsAgo)} ago`, i.live ? 'live' : 'gone']),
          );
        }
        if (unserved.length > 0) print(`nobody runs: ${unserved.map(oneLine).join(', ')} (queued jobs, and no live instance has a handler for the queue)`);
        for (const x of stalled) {
          print(`not claiming: ${oneLine(x.id)} has not claimed ${oneLine(x.queue)} for ${formatDuration(x.sinceClaimMs)} (bound ${formatDuration(x.stalledAfterMs)}; due jobs, idle slots)`);
        }
      }),
    );
}
