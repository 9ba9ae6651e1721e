import { describe, expect, it } from '@jest/globals';
import { once } from 'node:events';
import { useProducerAndWorkers } from './support/producer-and-workers.js';
import { waitFor } from './support/test-app.js';

// Job logs across a crash (README: "Job logs"): a worker process logs three lines per job, a heartbeat writes them,
// and the process is SIGKILLed while its handlers wait. Another process takes the jobs once their leases lapse (its
// sweeper puts them back) and completes them. Asserted from the tables: every job keeps the lines its killed attempt's
// last heartbeat wrote, followed by the second attempt's, and the attempt history records the lapsed lease.
describe('job logs across processes', () => {
  const t = useProducerAndWorkers('job-logs-processes', new URL('./logs/log-worker.ts', import.meta.url));

  it('SIGKILL after a heartbeat: the lines it wrote survive the crash, and the next attempt adds its own', async () => {
    const queue = t.queue;
    const victim = await t.spawnWorker({ HOLD: '1' });
    const ids = await queue.enqueueMany([1, 2, 3].map((n) => ({ queue: 'lx-work', payload: { n } })));
    // The lines are in the rows while the handlers still run: written by a heartbeat, not by an outcome.
    await waitFor(
      'a heartbeat wrote three lines of each job',
      async () => (await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'processing' AND jsonb_array_length(logs -> 'lines') = 3`, [ids])).rows[0].n === 3,
      30_000,
    );
    victim.kill('SIGKILL');
    await once(victim, 'exit');

    const survivor = await t.spawnWorker({});
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
