import { describe, expect, it } from '@jest/globals';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { READ_AHEAD_TABLES } from './read-ahead/read-ahead-fleet.js';
import type { ReadAheadPayload } from './read-ahead/read-ahead-worker.js';
import { useReadAheadFleet } from './read-ahead/use-read-ahead-fleet.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// Issue 43, "Jobs after enqueue": a change (here updatePayload, the one a handler would see) applies only to a job that
// has not started and that no worker holds. Two worker processes read ahead ('auto' and a fixed prefetch of 50) and
// record every handler call with the payload it saw (ra_runs); this process changes jobs from the workers' front on,
// where some are queued, some read ahead, some running. What each call answered must match what the tables hold.
const ra = useReadAheadFleet();

describe('changing jobs after enqueue, with two processes reading ahead (issue 43)', () => {
  it.each([3, 40])('updatePayload answers what the tables hold, and no handler sees a payload change under it (jobs of %i ms)', async (ms) => {
    const url = await createTestDatabase(`changes_${ms}`);
    const db = sqlPool(url);
    const app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    try {
      await db.query(READ_AHEAD_TABLES);
      const queue = app.get(QueueService);
      const opts = (prefetch: number | 'auto') => ({ maintenance: { sweepIntervalMs: 500 }, queues: { q: { concurrency: 8, prefetch } } });
      await Promise.all([ra.fleet.start('a', url, url, opts('auto')), ra.fleet.start('b', url, url, opts(50))]);
      const n = ms < 10 ? 4_000 : 1_200;
      await queue.enqueueMany(Array.from({ length: n }, () => ({ queue: 'q', payload: { ms, v: 'old' } satisfies ReadAheadPayload })));
      await waitFor('some jobs started', async () => (await db.query('SELECT 1 FROM ra_runs LIMIT 50')).rowCount! >= 50, 60_000, 10);
      const { rows: front } = await db.query<{ id: string }>(
        `SELECT id::text FROM (SELECT id, row_number() OVER (ORDER BY id) AS i FROM background_jobs
                               WHERE queue_name = 'q' AND status IN ('queued', 'processing')) AS t
         WHERE i % $1 = 1 ORDER BY i LIMIT 400`,
        // Spread over the whole backlog, not only its front: a CI run's workers held or ran every one of the first 1,200.
        [ms < 10 ? 9 : 3],
      );
      const answers = new Map<string, string>();
      for (let i = 0; i < front.length; i += 8) {
        const batch = front.slice(i, i + 8);
        const got = await Promise.all(batch.map(({ id }) => queue.updatePayload(id, { ms, v: 'new' } satisfies ReadAheadPayload)));
        batch.forEach(({ id }, k) => answers.set(id, got[k]));
      }
      await waitFor('queue q settled', async () => (await db.query(`SELECT 1 FROM background_jobs WHERE queue_name = 'q' AND status IN ('queued', 'processing') LIMIT 1`)).rowCount === 0, 120_000, 100);
      await new Promise((resolve) => setTimeout(resolve, 300)); // the last handlers' ra_runs rows
      const { rows } = await db.query<{ id: string; status: string; v: string; seen: string[] }>(
        `SELECT j.id::text, j.status::text, j.payload ->> 'v' AS v, array(SELECT r.payload ->> 'v' FROM ra_runs AS r WHERE r.job_id = j.id ORDER BY r.id) AS seen
         FROM background_jobs AS j WHERE j.queue_name = 'q' AND j.id = ANY($1::int8[])`,
        [[...answers.keys()]],
      );
      const byAnswer: Record<string, number> = {};
      const wrong: string[] = [];
      for (const r of rows) {
        const answer = answers.get(r.id)!;
        byAnswer[answer] = (byAnswer[answer] ?? 0) + 1;
        // changed: the row and its run have the new payload; running, held or completed (it ended first): the old one.
        const expected = answer === 'changed' ? 'new' : 'old';
        const ok = r.status === 'completed' && r.v === expected && r.seen.length === 1 && r.seen[0] === expected && ['changed', 'running', 'held', 'completed'].includes(answer);
        if (!ok) wrong.push(`job ${r.id}: answered ${answer}, row ${r.status} v=${r.v}, runs saw ${JSON.stringify(r.seen)}`);
      }
      console.log(`updatePayload (${ms} ms jobs): ${JSON.stringify(byAnswer)} of ${answers.size}`);
      expect(wrong.slice(0, 10)).toEqual([]);
      expect(rows.length).toBe(answers.size);
      // The race was there: some calls changed a waiting job, some met one a worker held or ran.
      expect(byAnswer.changed ?? 0).toBeGreaterThan(0);
      expect((byAnswer.held ?? 0) + (byAnswer.running ?? 0)).toBeGreaterThan(0);
    } finally {
      await ra.fleet.killAll();
      await app.close();
      await db.end();
    }
  }, 180_000);
});
