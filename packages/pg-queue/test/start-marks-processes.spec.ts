import type { INestApplicationContext } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { QueueService, type JobHandlerOptions } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { READ_AHEAD_TABLES } from './read-ahead/read-ahead-fleet.js';
import type { ReadAheadPayload } from './read-ahead/read-ahead-worker.js';
import { useReadAheadFleet } from './read-ahead/use-read-ahead-fleet.js';
import { runCli } from './support/run-cli.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// Issue 39 items 1-3, with two worker processes reading ahead ('auto' on one, a fixed prefetch of 50 on the other),
// jobs of a few ms and of 50 ms: whatever reads "not started" in the database (a bulk cancel of queued jobs,
// onConflict 'replace', a failing flow's cancel of its pending steps) never acts on a job whose handler began. The
// workers (read-ahead/read-ahead-worker.ts) record every handler call in ra_runs; the assertions join it with the jobs.
const ra = useReadAheadFleet();

interface Setup {
  url: string;
  db: pg.Pool;
  app: INestApplicationContext;
  queue: QueueService;
  close(): Promise<void>;
}

async function setUp(label: string): Promise<Setup> {
  const url = await createTestDatabase(label);
  const db = sqlPool(url);
  const app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
  await db.query(READ_AHEAD_TABLES);
  return {
    url,
    db,
    app,
    queue: app.get(QueueService),
    close: async () => {
      await ra.fleet.killAll();
      await app.close();
      await db.end();
    },
  };
}

/** Two workers of queue `queue`: 'a' with prefetch 'auto', 'b' with a fixed prefetch of 50, concurrency 8 each. */
async function twoWorkers(s: Setup, queue: string, extra: Record<string, JobHandlerOptions> = {}): Promise<() => Promise<void>> {
  const opts = (prefetch: number | 'auto') => ({ maintenance: { sweepIntervalMs: 500 }, queues: { ...extra, [queue]: { concurrency: 8, prefetch } } });
  const workers = await Promise.all([ra.fleet.start('a', s.url, s.url, opts('auto')), ra.fleet.start('b', s.url, s.url, opts(50))]);
  // Closes both (app.close(): every handler has ended, its ra_runs row written): after it nothing more can start.
  return async () => {
    await Promise.all(workers.map((w) => ra.fleet.close(w)));
  };
}

async function count(db: pg.Pool, sql: string, values: unknown[] = []): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM (${sql}) AS q`, values);
  return rows[0].n;
}

const settled = (db: pg.Pool, queue: string) =>
  waitFor(`queue ${queue} settled`, async () => (await count(db, `SELECT 1 FROM background_jobs WHERE queue_name = $1 AND status IN ('queued', 'processing')`, [queue])) === 0, 120_000, 100);

describe('start marks with two processes reading ahead (issue 39 items 1-3)', () => {
  it.each([3, 50])('item 1: a bulk cancel of queued jobs cancels none whose handler began (jobs of %i ms)', async (ms) => {
    const s = await setUp(`sm_cancel_${ms}`);
    try {
      const stopWorkers = await twoWorkers(s, 'q');
      const n = ms < 10 ? 4_000 : 1_200;
      await s.queue.enqueueMany(Array.from({ length: n }, () => ({ queue: 'q', payload: { ms } satisfies ReadAheadPayload })));
      await waitFor('a fifth of the jobs started', async () => (await count(s.db, 'SELECT 1 FROM ra_runs')) >= n / 5, 60_000, 20);
      const cancel = await runCli(['jobs', 'cancel', '--queue', 'q', '--status', 'queued', '--yes'], { DATABASE_URL: s.url, FORCE_COLOR: '0' }, undefined, ra.cli);
      expect({ code: cancel.code, stderr: cancel.stderr }).toEqual({ code: 0, stderr: '' });
      await settled(s.db, 'q');
      await stopWorkers(); // the last handlers' ra_runs rows, and no start after the assertions' reads
      const { rows: [r] } = await s.db.query<{ cancelled: number; cancelled_began: number; completed: number; completed_unrun: number; ran_twice: number }>(
        `SELECT count(*) FILTER (WHERE j.status = 'cancelled')::int AS cancelled,
                count(*) FILTER (WHERE j.status = 'cancelled' AND EXISTS (SELECT 1 FROM ra_runs AS r WHERE r.job_id = j.id))::int AS cancelled_began,
                count(*) FILTER (WHERE j.status = 'completed')::int AS completed,
                count(*) FILTER (WHERE j.status = 'completed' AND NOT EXISTS (SELECT 1 FROM ra_runs AS r WHERE r.job_id = j.id))::int AS completed_unrun,
                (SELECT count(*)::int FROM (SELECT job_id FROM ra_runs GROUP BY job_id HAVING count(*) > 1) AS t) AS ran_twice
         FROM background_jobs AS j WHERE j.queue_name = 'q'`,
      );
      console.log(`bulk cancel of queued jobs (${ms} ms): ${JSON.stringify(r)}`);
      expect(r.cancelled).toBeGreaterThan(0);
      expect({ cancelledWhoseHandlerBegan: r.cancelled_began, completedUnrun: r.completed_unrun, ranTwice: r.ran_twice, all: r.cancelled + r.completed }).toEqual({
        cancelledWhoseHandlerBegan: 0,
        completedUnrun: 0,
        ranTwice: 0,
        all: n,
      });
    } finally {
      await s.close();
    }
  }, 180_000);

  it.each([3, 50])('item 2: onConflict replace never rewrites a job whose handler began (jobs of %i ms)', async (ms) => {
    const s = await setUp(`sm_replace_${ms}`);
    try {
      const stopWorkers = await twoWorkers(s, 'q');
      const n = ms < 10 ? 4_000 : 1_200;
      const keys = Array.from({ length: n }, (_, i) => `k${i}`);
      await s.queue.enqueueMany(keys.map((uniqueKey) => ({ queue: 'q', payload: { ms, v: 'old' } satisfies ReadAheadPayload, uniqueKey })));
      await waitFor('some jobs started', async () => (await count(s.db, 'SELECT 1 FROM ra_runs')) >= 50, 60_000, 10);
      // Replace every fifth key from the workers' front on, 8 at a time: some are queued, some read ahead, some running.
      const { rows: next } = await s.db.query<{ k: string }>(
        `SELECT k FROM (SELECT unique_key AS k, row_number() OVER (ORDER BY id) AS i FROM background_jobs
                        WHERE queue_name = 'q' AND unique_key IS NOT NULL AND status IN ('queued', 'processing')) AS t
         WHERE i % 5 = 1 ORDER BY i LIMIT 400`,
      );
      let replaced = 0;
      for (let i = 0; i < next.length; i += 8) {
        const results = await Promise.all(
          next.slice(i, i + 8).map(({ k }) => s.queue.enqueueUnique('q', { ms, v: 'new' } satisfies ReadAheadPayload, { uniqueKey: k, onConflict: 'replace' })),
        );
        replaced += results.filter((x) => x.replaced).length;
      }
      await settled(s.db, 'q');
      await stopWorkers();
      const bothPayloads = await count(s.db, `SELECT job_id FROM ra_runs GROUP BY job_id HAVING count(DISTINCT payload ->> 'v') > 1`);
      const ranTwice = await count(s.db, `SELECT job_id FROM ra_runs GROUP BY job_id HAVING count(*) > 1`);
      console.log(`replace (${ms} ms): ${replaced} of ${next.length} replaces took a job; jobs run with the old payload and again with the new: ${bothPayloads}; run twice: ${ranTwice}`);
      expect(replaced).toBeGreaterThan(0);
      expect({ bothPayloads, ranTwice }).toEqual({ bothPayloads: 0, ranTwice: 0 });
    } finally {
      await s.close();
    }
  }, 180_000);

  it.each([2, 50])('item 3: a failing flow cancels no step that began, and compensates every step that completed (steps of %i ms)', async (ms) => {
    const s = await setUp(`sm_flows_${ms}`);
    try {
      const stopWorkers = await twoWorkers(s, 'ra-step', { 'ra-undo': { concurrency: 4 } });
      const flows = 10;
      const ids: string[] = [];
      for (let f = 0; f < flows; f++) {
        const jobs = Array.from({ length: 149 }, (_, i) => {
          const v = `f${f}s${i}`;
          return { ref: v, queue: 'ra-step', maxAttempts: 1, payload: { ms, v, fail: i === 20 } satisfies ReadAheadPayload, compensate: { queue: 'ra-undo', payload: { undo: v } satisfies ReadAheadPayload } };
        });
        ids.push((await s.queue.enqueueFlow({ name: `flow ${f}`, jobs })).id);
      }
      await waitFor('every flow finished', async () => (await count(s.db, `SELECT 1 FROM background_flows WHERE finished_at IS NULL`)) === 0, 60_000, 200).catch(async (error: unknown) => {
        const { rows: jobs } = await s.db.query(`SELECT queue_name, status, buffered, count(*)::int AS n FROM background_jobs GROUP BY 1, 2, 3 ORDER BY 1, 2`);
        const { rows: flowRows } = await s.db.query(`SELECT status, count(*)::int AS n FROM background_flows GROUP BY 1`);
        throw new Error(`${String(error)}: jobs ${JSON.stringify(jobs)}, flows ${JSON.stringify(flowRows)}`);
      });
      await settled(s.db, 'ra-undo');
      await stopWorkers();
      const { rows: [r] } = await s.db.query<{ completed: number; cancelled: number; cancelled_began: number; uncompensated: number; ran_to_end_uncompensated: number; ran_twice: number }>(
        `SELECT count(*) FILTER (WHERE j.status = 'completed')::int AS completed,
                count(*) FILTER (WHERE EXISTS (SELECT 1 FROM ra_runs AS r WHERE r.job_id = j.id AND r.ended_at IS NOT NULL)
                                   AND NOT EXISTS (SELECT 1 FROM ra_runs AS r WHERE r.payload ->> 'undo' = j.payload ->> 'v'))::int AS ran_to_end_uncompensated,
                count(*) FILTER (WHERE j.status = 'cancelled')::int AS cancelled,
                count(*) FILTER (WHERE j.status = 'cancelled' AND EXISTS (SELECT 1 FROM ra_runs AS r WHERE r.job_id = j.id))::int AS cancelled_began,
                count(*) FILTER (WHERE j.status = 'completed' AND NOT EXISTS (SELECT 1 FROM ra_runs AS r WHERE r.payload ->> 'undo' = j.payload ->> 'v'))::int AS uncompensated,
                (SELECT count(*)::int FROM (SELECT job_id FROM ra_runs GROUP BY job_id HAVING count(*) > 1) AS t) AS ran_twice
         FROM background_jobs AS j WHERE j.queue_name = 'ra-step'`,
      );
      const { rows: ends } = await s.db.query<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM background_flows GROUP BY 1`);
      console.log(`failing flows (${ms} ms steps): ${JSON.stringify(r)}; flows ${JSON.stringify(ends)}`);
      expect(r.completed).toBeGreaterThan(0);
      expect({
        cancelledWhoseHandlerBegan: r.cancelled_began,
        completedWithoutCompensation: r.uncompensated,
        ranToTheEndWithoutCompensation: r.ran_to_end_uncompensated,
        ranTwice: r.ran_twice,
        flows: ends,
      }).toEqual({
        cancelledWhoseHandlerBegan: 0,
        completedWithoutCompensation: 0,
        ranToTheEndWithoutCompensation: 0,
        ranTwice: 0,
        flows: [{ status: 'compensated', n: flows }],
      });
    } finally {
      await s.close();
    }
  }, 240_000);
});
