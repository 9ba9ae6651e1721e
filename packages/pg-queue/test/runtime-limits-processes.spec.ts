import { describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { LimitsFleet } from './limits/limits-fleet.js';
import { LIMITS_MAINTENANCE, setUpLimits, tearDownLimits, useLimitsWorkerBuild } from './limits/limits-setup.js';
import { waitFor } from './support/test-app.js';

// Limits changed at runtime and by a handler's 429 (issue 42, part 2), read back from what the handlers of three real
// OS processes recorded (limit_runs: each run's start and end by the database clock) and from the queue's row.
/**
 * A claim or start mark whose snapshot came before a block's commit may still start its jobs, though it began after
 * the block's statement did (from_ms below, that statement's now()): the block's own run time. Starts are asserted
 * absent from the block's start plus this until its end, by when the database said each job started (limit_runs
 * marked_at: its claim, or its start mark), not by when its handler got to record itself, which a loaded machine
 * delays at will. A job started ahead (armed: its row said started before the block) may still begin in the block,
 * until the block's notice reaches its worker: it counts as started at its mark.
 */
const IN_FLIGHT_MS = 150;
/** The 429s the handlers threw (limits-worker.ts, queue `runtime`). */
const LIMIT_429S = `CREATE TABLE limit_429s (job_id int8 PRIMARY KEY, worker text NOT NULL, at timestamptz NOT NULL)`;

const workerScript = useLimitsWorkerBuild();

/** The database clock's reading, as epoch ms. */
async function dbNow(db: pg.Pool): Promise<number> {
  const { rows } = await db.query<{ t: number }>(`SELECT date_part('epoch', clock_timestamp()) * 1000 AS t`);
  return rows[0].t;
}

/** When the queue's limits were last stored (the statement's now()), as epoch ms. */
async function storedAt(db: pg.Pool, queue: string): Promise<number> {
  const { rows } = await db.query<{ t: number }>(`SELECT date_part('epoch', updated_at) * 1000 AS t FROM background_queues WHERE queue_name = $1`, [queue]);
  return rows[0].t;
}

/**
 * For the runs of `queue` that started at or after `fromMs` (epoch ms, database clock): the most runs in progress at one
 * of their starts, all runs counted (those started before `fromMs` too), per process when `perWorker`.
 */
async function mostAtStarts(db: pg.Pool, queue: string, fromMs: number, perWorker = false): Promise<{ most: number; starts: number }> {
  const { rows } = await db.query<{ most: number | null; starts: number }>(
    `SELECT max(n)::int AS most, count(*)::int AS starts FROM (
       SELECT (SELECT count(*) FROM limit_runs AS o
               WHERE o.queue = s.queue AND (NOT $3 OR o.worker = s.worker)
                 AND o.started_at <= s.started_at AND (o.ended_at IS NULL OR o.ended_at > s.started_at)) AS n
       FROM limit_runs AS s WHERE s.queue = $1 AND s.started_at >= to_timestamp($2 / 1000.0)
     ) AS x`,
    [queue, fromMs, perWorker],
  );
  return { most: rows[0].most ?? 0, starts: rows[0].starts };
}

const completed = (db: pg.Pool, queue: string) => async () => {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = $1 AND status = 'completed'`, [queue]);
  return rows[0].n;
};

/** Waits until the database clock passes `atMs`. */
async function until(db: pg.Pool, atMs: number, what: string): Promise<void> {
  await waitFor(what, async () => (await dbNow(db)) >= atMs, 60_000, 50);
}

describe('limits changed at runtime, across three OS processes', () => {
  it('a global limit holds from its commit plus one second, a per-process concurrency change too, and null gives back the decorator\'s', async () => {
    const s = await setUpLimits('rtlimits', LIMIT_429S);
    // No limit in the decorator: the plain claim, with read-ahead ('auto'), until the limit is stored.
    const fleet = new LimitsFleet(workerScript(), s.url, { maintenance: LIMITS_MAINTENANCE, queues: { runtime: { concurrency: 4 } } });
    try {
      await s.queue.enqueueMany(Array.from({ length: 3_000 }, (_, i) => ({ queue: 'runtime', payload: { ms: 30 + (i % 5) * 10 } })));
      await fleet.start(3);
      await waitFor('jobs running', async () => (await completed(s.db, 'runtime')()) >= 100, 60_000);
      const before = await mostAtStarts(s.db, 'runtime', 0);
      expect(before.most).toBeGreaterThan(2); // unlimited, the three processes ran more than the limit about to be set

      const limits = await s.queue.setQueueLimits('runtime', { globalConcurrency: 2 });
      expect(limits.globalConcurrency).toEqual({ value: 2, source: 'database' });
      const t1 = await storedAt(s.db, 'runtime');
      await until(s.db, t1 + 3_000, 'two seconds under the global limit');
      const global = await mostAtStarts(s.db, 'runtime', t1 + 1_000);
      expect(global.starts).toBeGreaterThan(10);
      expect(global.most).toBeLessThanOrEqual(2);

      // Per process: one job at a time in each, no global limit ('none' over the decorator's, which has none either).
      await s.queue.setQueueLimits('runtime', { concurrency: 1, globalConcurrency: 'none' });
      const t2 = await storedAt(s.db, 'runtime');
      await until(s.db, t2 + 3_000, 'two seconds at concurrency 1');
      const perWorker = await mostAtStarts(s.db, 'runtime', t2 + 1_000, true);
      expect(perWorker.starts).toBeGreaterThan(10);
      expect(perWorker.most).toBe(1);
      const { rows: workers } = await s.db.query<{ n: number }>(
        `SELECT count(DISTINCT worker)::int AS n FROM limit_runs WHERE queue = 'runtime' AND started_at >= to_timestamp($1 / 1000.0)`,
        [t2 + 1_000],
      );
      expect(workers[0].n).toBe(3);

      // Back to the decorator's values: stored as nothing, the processes run 4 each again.
      const back = await s.queue.setQueueLimits('runtime', { concurrency: null, globalConcurrency: null });
      expect(back.concurrency.source).toBe('decorator');
      expect(back.globalConcurrency.source).toBe('decorator');
      expect((await s.db.query(`SELECT limits FROM background_queues WHERE queue_name = 'runtime'`)).rows).toEqual([{ limits: null }]);
      const t3 = await storedAt(s.db, 'runtime');
      await until(s.db, t3 + 2_500, 'the decorator\'s concurrency again');
      expect((await mostAtStarts(s.db, 'runtime', t3 + 1_000, true)).most).toBeGreaterThan(1);
    } finally {
      await tearDownLimits(s, fleet);
    }
  }, 180_000);

  it('a 429 from one handler stops starts in every process for its time; the job goes back uncharged; a key\'s 429 stops only that key', async () => {
    const s = await setUpLimits('rt429', LIMIT_429S);
    const fleet = new LimitsFleet(workerScript(), s.url, { maintenance: LIMITS_MAINTENANCE, queues: { runtime: { concurrency: 2 } } });
    try {
      const BLOCK_MS = 1_500;
      await s.queue.enqueueMany(Array.from({ length: 1_500 }, (_, i) => ({ queue: 'runtime', payload: i === 150 ? { ms: 20, rateLimitedMs: BLOCK_MS } : { ms: 20 } })));
      await fleet.start(3);
      const thrown = await waitFor('the 429', async () => (await s.db.query<{ job_id: string; worker: string }>(`SELECT job_id, worker FROM limit_429s`)).rows[0], 60_000);
      // The handler's row is written before it throws; the block is the worker's outcome write, a moment later.
      const block = await waitFor('the queue\'s block', async () => (await s.db.query<{ from_ms: number; until_ms: number }>(
        `SELECT date_part('epoch', blocked_until - rate_backoff_ms * interval '1 millisecond') * 1000 AS from_ms, date_part('epoch', blocked_until) * 1000 AS until_ms
         FROM background_queues WHERE queue_name = 'runtime' AND blocked_until IS NOT NULL`,
      )).rows[0]);
      const blocks = [block];
      expect(blocks[0].until_ms - blocks[0].from_ms).toBe(BLOCK_MS);
      // The job went back uncharged, saying why.
      const job = await waitFor('the job back in the queue', async () => {
        const { rows } = await s.db.query<{ status: string; attempts: number; last_error: string | null }>(`SELECT status, attempts, last_error FROM background_jobs WHERE id = $1`, [thrown.job_id]);
        return rows[0].status === 'queued' ? rows[0] : undefined;
      });
      expect(job).toEqual({ status: 'queued', attempts: 0, last_error: `rate limited by the partner for ${BLOCK_MS} ms` });
      await until(s.db, blocks[0].until_ms + 1_000, 'the block over');
      const { rows: inBlock } = await s.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM limit_runs WHERE queue = 'runtime' AND marked_at >= to_timestamp($1 / 1000.0) AND marked_at < to_timestamp($2 / 1000.0)`,
        [blocks[0].from_ms + IN_FLIGHT_MS, blocks[0].until_ms],
      );
      expect(inBlock[0].n).toBe(0);
      // Before and after the block, every process ran jobs (the block stopped the others, not only the one that met the 429).
      const { rows: after } = await s.db.query<{ n: number }>(
        `SELECT count(DISTINCT worker)::int AS n FROM limit_runs WHERE queue = 'runtime' AND started_at >= to_timestamp($1 / 1000.0)`,
        [blocks[0].until_ms],
      );
      expect(after[0].n).toBe(3);
      const ran = await waitFor('the rate-limited job run', async () => {
        const { rows } = await s.db.query<{ status: string; attempts: number }>(`SELECT status, attempts FROM background_jobs WHERE id = $1`, [thrown.job_id]);
        return rows[0].status === 'completed' ? rows[0] : undefined;
      }, 60_000);
      expect(ran.attempts).toBe(1); // the 429's attempt was not counted

      // A key's 429: the key's jobs wait, the other key's run on.
      await s.db.query(`DELETE FROM limit_runs`);
      await s.queue.enqueueMany(
        Array.from({ length: 1_200 }, (_, i) => ({
          queue: 'runtime',
          payload: i === 100 ? { ms: 20, rateLimitedMs: BLOCK_MS, key: 'a' } : { ms: 20 },
          concurrencyKey: i % 2 === 0 ? 'a' : 'b',
        })),
      );
      const keyed = await waitFor('the key\'s 429', async () => (await s.db.query<{ job_id: string }>(`SELECT job_id FROM limit_429s WHERE job_id <> $1`, [thrown.job_id])).rows[0], 60_000);
      expect(keyed).toBeDefined();
      const keyBlock = await waitFor('the key\'s block', async () => (await s.db.query<{ from_ms: number; until_ms: number }>(
        `SELECT date_part('epoch', blocked_until - backoff_ms * interval '1 millisecond') * 1000 AS from_ms, date_part('epoch', blocked_until) * 1000 AS until_ms
         FROM background_queue_key_blocks WHERE queue_name = 'runtime' AND concurrency_key = 'a'`,
      )).rows[0]);
      const keyBlocks = [keyBlock];
      await until(s.db, keyBlocks[0].until_ms + 500, 'the key\'s block over');
      const { rows: byKey } = await s.db.query<{ concurrency_key: string; n: number }>(
        `SELECT concurrency_key, count(*)::int AS n FROM limit_runs
         WHERE queue = 'runtime' AND marked_at >= to_timestamp($1 / 1000.0) AND marked_at < to_timestamp($2 / 1000.0) GROUP BY 1`,
        [keyBlocks[0].from_ms + IN_FLIGHT_MS, keyBlocks[0].until_ms],
      );
      const counts = Object.fromEntries(byKey.map((r) => [r.concurrency_key, r.n]));
      expect(counts.a ?? 0).toBe(0);
      expect(counts.b).toBeGreaterThan(10);
    } finally {
      await tearDownLimits(s, fleet);
    }
  }, 180_000);
});
