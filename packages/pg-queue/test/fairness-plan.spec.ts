import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { FAIR_WINDOW_KEYS } from '../src/store/claim.sql.js';
import { SQL } from '../src/store/job.sql.js';
import { explainClaim } from './support/plans.js';
import { sqlPool, startApp } from './support/test-app.js';

// Plans of the fair claim (claimFairJobs) on a table of 100,000 queued jobs over 1,000 keys: every read goes through
// an index, and its window walks max(allowance, FAIR_WINDOW_KEYS) keys in turn, not all 1,000 that have queued jobs.
// The cost at 1M jobs over 10,000 keys, next to the plain and the keyed claim: apps/bench/src/plans/claim-cost.ts.
describe('fair claim plans', () => {
  let app: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    const url = await createTestDatabase('fairplan');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    const queue = app.get(QueueService);
    for (let c = 0; c < 10; c++) {
      await queue.enqueueMany(Array.from({ length: 10_000 }, (_, i) => ({ queue: 'fair', payload: { i }, concurrencyKey: `k${String((i + c * 10_000) % 1_000).padStart(4, '0')}` })));
    }
    // A few running jobs, as a fair queue has: the window counts each key's running jobs through background_jobs_limited_idx.
    await db.query(`UPDATE background_jobs SET status = 'processing', limited = true, locked_by = 'w', locked_at = now(), lease_expires_at = now() + interval '1 minute', attempts = 1
                    WHERE id IN (SELECT id FROM background_jobs WHERE queue_name = 'fair' AND concurrency_key IN ('k0501', 'k0502') ORDER BY id LIMIT 4)`);
    await db.query('ANALYZE background_jobs');
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  /** EXPLAIN ANALYZE of the fair claim inside the transaction it runs in, rolled back. */
  const explain = (limit: number, weights: Record<string, number> = {}) => explainFair(db, 'fair', limit, weights, true);

  /** Rows the window's walk of the keys after the cursor made (its recursive CTE, one probe per key). */
  const walked = (plan: string) => Number(/CTE after\s+->\s+Recursive Union \(actual time=[\d.]+\.\.[\d.]+ rows=(\d+)/.exec(plan)?.[1]);

  it.each([10, 50])('a claim of %i reads through indexes only and walks max(allowance, 16) keys, not 1,000', async (limit) => {
    const plan = await explain(limit, { k0501: 3 });
    if (process.env.PRINT_PLAN) console.log(plan);
    expect(plan).not.toMatch(/Seq Scan on background_jobs/);
    expect(claimed(plan)).toBe(limit);
    // The window takes max(allowance, FAIR_WINDOW_KEYS) keys after the cursor; the recursive walk makes one row more
    // (the probe that found the next key, read before the LIMIT stopped it) at most.
    const window = Math.max(limit, FAIR_WINDOW_KEYS);
    expect(walked(plan)).toBeGreaterThanOrEqual(window);
    expect(walked(plan)).toBeLessThanOrEqual(window + 1);
    // 500 keys follow the cursor: the walk from the first key up to it is never needed.
    expect(plan).toMatch(/CTE upto\s+->\s+Recursive Union \(never executed\)/);
  });

  it('probes per key only what can matter: no stored weight, block or running count to find, no offer past the bound', async () => {
    // Every key's pass is the same (none stored yet), so the window's 16 keys tie: the claim's order takes the first 10.
    const plan = await explain(10);
    if (process.env.PRINT_PLAN) console.log(plan);
    expect(claimed(plan)).toBe(10);
    // No weight stored for the queue, no key blocked, no global cap: the per-key probes of those are never run.
    expect(plan).toMatch(/Index Scan using background_queue_weights_pkey on background_queue_weights \w+ \(never executed\)/);
    expect(plan).not.toMatch(/on background_queue_key_blocks \w+ \(actual/);
    expect(plan).toMatch(/CTE running\s+->\s+Result \(actual[^\n]*\n(?:.*\n)*?\s+->\s+Aggregate \(never executed\)/);
    // The due check is the walk's own probe (KEY_TURN's `first`), and the 6 tied keys past the 10th offer nothing: the
    // offers' scans of the keyed claim index run 10 times, not 16, and nothing else reads a key's first job again.
    const offers = /Index (?:Only )?Scan using background_jobs_key_claim_idx on background_jobs j(?:_\d+)? \(actual time=[\d.]+\.\.[\d.]+ rows=[\d.]+ loops=(\d+)\)/.exec(plan);
    expect(Number(offers?.[1])).toBe(10);
    expect(plan.match(/using background_jobs_key_claim_idx/g)).toHaveLength(5); // after (2), upto (2), the offers (1)
    // No queued keyed job has another priority than 0: one probe finds none, and no key walks them.
    expect(plan).toMatch(/CTE key_priorities\n(?:.*\n){1,6}?\s+->\s+Index Only Scan using background_jobs_key_priority_idx on background_jobs \w+ \(actual time=[\d.]+\.\.[\d.]+ rows=0(?:\.00)? loops=1\)/);
    expect(plan).not.toMatch(/Scan using background_jobs_key_priority_idx on background_jobs j(?:_\d+)? \(actual/);
  });
});

/** EXPLAIN (ANALYZE, BUFFERS) of the fair claim inside the transaction it runs in, rolled back. */
function explainFair(db: pg.Pool, queue: string, limit: number, weights: Record<string, number>, lookKeyless: boolean): Promise<string> {
  // $1 queue, $2 jobs wanted, $3 worker, $4 lease ms, $5 globalConcurrency, $6/$7 rate limit, $8 concurrencyPerKey, $9 key cursor, $10 weights,
  // $11 default weight, $12 look for jobs without a key, $13 jobs started now (the rest read ahead), $14 their buffer lease ms,
  // $15 the worker's copy of the queue's stored limits (none)
  return explainClaim(db, SQL.claimFairJobs, [queue, limit, 'w', 30_000, null, null, 0, null, 'k0500', JSON.stringify(weights), 1, lookKeyless, limit, 30_000, null]);
}

/** Rows the claim's two UPDATEs changed (started now, and read ahead: the fair claim's read-ahead): the jobs it claimed. */
const claimed = (plan: string) =>
  ['started', 'held'].reduce((sum, cte) => sum + Number(new RegExp(`CTE ${cte}\\s+->\\s+Update on background_jobs \\w+ \\(actual time=[\\d.]+\\.\\.[\\d.]+ rows=(\\d+)`).exec(plan)?.[1]), 0);

// One key with all of a table's 20,000 queued jobs, 40 of them running (a tenant alone with a backlog, as in
// claim-cost.ts --rows 20000 --keys 1): the chosen ids were joined to background_jobs as an IN (subquery), which
// PostgreSQL 18 planned as a hash join over a sequential scan of the whole table (4-8 ms a claim, 520 pages); and
// every claim read the queue's first 200 due jobs, a heap fetch apiece, to find none without a key.
describe('fair claim plans, one key alone', () => {
  let app: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    const url = await createTestDatabase('fairsolo');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    const queue = app.get(QueueService);
    for (let c = 0; c < 2; c++) await queue.enqueueMany(Array.from({ length: 10_000 }, (_, i) => ({ queue: 'solo', payload: { i }, concurrencyKey: 'only' })));
    await db.query(`UPDATE background_jobs SET status = 'processing', limited = true, locked_by = 'w', locked_at = now(), lease_expires_at = now() + interval '1 minute', attempts = 1
                    WHERE id IN (SELECT id FROM background_jobs ORDER BY id LIMIT 40)`);
    await db.query('VACUUM ANALYZE background_jobs');
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it.each([true, false])('a claim of 10 reads no sequential scan (looking for jobs without a key: %s)', async (look) => {
    const plan = await explainFair(db, 'solo', 10, {}, look);
    if (process.env.PRINT_PLAN) console.log(plan);
    expect(plan).not.toMatch(/Seq Scan on background_jobs/);
    expect(claimed(plan)).toBe(10);
    const pages = Number(/^\S.*\n\s+Buffers: shared hit=(\d+)/.exec(plan)?.[1]);
    // The plain claim of 10 reads about 120 pages here (claim-cost.ts); the fair one about 150, and 8 more when it looks.
    expect(pages).toBeLessThan(300);
    // Without the look, the read of the queue's first 200 due entries is not run at all (a one-time filter).
    if (!look) expect(plan).toMatch(/Sort Key: (?:\w+\.)?priority DESC, (?:\w+\.)?run_at, (?:\w+\.)?id\n(?:.*\n){0,3}.*One-Time Filter: false/);
  });
});
