import type { Command } from 'commander';
import type { QueueStats } from '../../interfaces/job.interface.js';
import { count, print, printJson, printTable } from '../output.js';
import type { Run } from '../run.js';
import { ALL_STATUSES } from './jobs.js';

export function registerStats(program: Command, run: Run): void {
  program
    .command('stats')
    .description('jobs per queue and status (exact up to 10,000 per queue and status, estimated above: marked ~), and paused queues')
    .option('--json', 'as JSON: { queues: { <queue>: { queued, blocked, processing, completed, failed, cancelled, approximate? } }, paused: [...] }')
    .action(
      run(async (connection, _args, options: { json?: boolean }) => {
        const store = connection.jobStore();
        const [stats, paused] = await Promise.all([store.countByStatus(), store.pausedQueues()]);
        if (options.json) return printJson({ queues: stats, paused });
        printStats(stats, paused);
      }),
    );
}

function printStats(stats: QueueStats, paused: string[]): void {
  const queues = [...new Set([...Object.keys(stats), ...paused])].sort();
  if (queues.length === 0) return print('no jobs');
  const rows = queues.map((queue) => {
    const counts = stats[queue];
    const cells = ALL_STATUSES.map((s) => (counts ? `${counts.approximate?.includes(s) ? '~' : ''}${count(counts[s])}` : '0'));
    return [queue, ...cells, paused.includes(queue) ? 'yes' : ''];
  });
  printTable(['queue', ...ALL_STATUSES, 'paused'], rows);
}
