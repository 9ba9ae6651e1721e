import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './faults/support/build-worker.js';
import { forkLoaded, startForked } from './support/serve-start.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// Job logs across a crash (README: "Job logs"): a worker process logs three lines per job, a heartbeat writes them,
// and the process is SIGKILLed while its handlers wait. Another process takes the jobs once their leases lapse (its
// sweeper puts them back) and completes them. Asserted from the tables: every job keeps the lines its killed attempt's
// last heartbeat wrote, followed by the second attempt's, and the attempt history records the lapsed lease.
describe('job logs across processes', () => {
  let build: WorkerBuild;
  const children: ChildProcess[] = [];
  let producer: INestApplicationContext;
  let db: pg.Pool;
  let url: string;

  const spawnWorker = async (env: Record<string, string>): Promise<ChildProcess> => {
    const child = await forkLoaded(build.script, env);
    children.push(child);
    return startForked(child, { url });
  };

  beforeAll(async () => {
    url = await createTestDatabase('job-logs-processes');
    producer = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    db = sqlPool(url);
    build = await buildWorker([fileURLToPath(new URL('./logs/log-worker.ts', import.meta.url))]);
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? once(c, 'exit') : undefined)));
    await producer?.close();
    await db?.end();
    await build?.remove();
  });

  it('SIGKILL after a heartbeat: the lines it wrote survive the crash, and the next attempt adds its own', async () => {
    const queue = producer.get(QueueService);
    const victim = await spawnWorker({ HOLD: '1' });
    const ids = await queue.enqueueMany([1, 2, 3].map((n) => ({ queue: 'lx-work', payload: { n } })));
    // The lines are in the rows while the handlers still run: written by a heartbeat, not by an outcome.
    await waitFor(
      'a heartbeat wrote three lines of each job',
      async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'processing' AND jsonb_array_length(logs -> 'lines') = 3`, [ids])).rows[0].n === 3,
      30_000,
    );
    victim.kill('SIGKILL');
    await once(victim, 'exit');

    const survivor = await spawnWorker({});
    for (const id of ids) expect(await queue.waitFor(id, { timeoutMs: 30_000 })).toEqual({ pid: survivor.pid });
    for (const [i, id] of ids.entries()) {
      const job = (await queue.get(id))!;
      expect(job).toMatchObject({ status: 'completed', attempts: 2, logsDropped: 0 });
      expect(job.logs.map((l) => [l.attempt, l.line])).toEqual([
        [1, `attempt 1 (pid ${victim.pid}): step 1 of job ${i + 1}`],
        [1, `attempt 1 (pid ${victim.pid}): step 2 of job ${i + 1}`],
        [1, `attempt 1 (pid ${victim.pid}): step 3 of job ${i + 1}`],
        [2, `attempt 2 (pid ${survivor.pid}): step 1 of job ${i + 1}`],
        [2, `attempt 2 (pid ${survivor.pid}): step 2 of job ${i + 1}`],
        [2, `attempt 2 (pid ${survivor.pid}): step 3 of job ${i + 1}`],
        [2, `attempt 2 (pid ${survivor.pid}): done`],
      ]);
      // Beside them, the attempt history: the first attempt's lease lapsed with its process.
      expect(job.history.map((h) => [h.attempt, h.outcome])).toEqual([[1, 'lease-expired']]);
      // The killed attempt's lines are dated before the sweep that ended it, by the database clock.
      expect(job.logs[2].at.getTime()).toBeLessThanOrEqual(job.history[0].finishedAt.getTime());
    }
  }, 90_000);
});
