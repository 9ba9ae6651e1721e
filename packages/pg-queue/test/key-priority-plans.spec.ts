import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { SQL } from '../src/store/job.sql.js';
import { explainClaim, inClaimTransaction } from './support/plans.js';
import { sqlPool, startApp } from './support/test-app.js';

// Priority within a key (README, Limits; migration KeyPriorities1764780000000): the keyed and the fair claims on a
// table of 100,000 queued jobs over 1,000 keys, one in ten of priority 3, one in ten of priority -2, and 2,000
// scheduled for tomorrow at priority 9. Each claim takes every key's highest priority due jobs first, reading them
// through background_jobs_key_priority_idx, and reads at most 1.5x what the claim without priorities reads.

const KEYED = 'kp-keyed';
const FAIR = 'kp-fair';
/** The claims asserted: the keyed claim (concurrencyPerKey 1) of 10, the fair claim of 10 and of 50. */
const CLAIMS = [
  ['claimKeyedJobs', KEYED, 10],
  ['claimFairJobs', FAIR, 10],
  ['claimFairJobs', FAIR, 50],
] as const;

describe('priority within a key: the claims on a large table', () => {
  let app: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    const url = await createTestDatabase('keyprio');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    const queue = app.get(QueueService);
    for (const name of [KEYED, FAIR, 'kp-flat']) {
      for (let c = 0; c < (name === 'kp-flat' ? 2 : 5); c++) {
        await queue.enqueueMany(
          Array.from({ length: 10_000 }, (_, i) => {
            const n = i + c * 10_000;
            // Every key has jobs of each priority: the n-th thousand jobs (one per key) of priority 3 when n ends in 3,
            // of -2 when it ends in 7 (one in ten, one in ten), else of 0.
            const round = Math.floor(n / 1_000) % 10;
            const priority = name === 'kp-flat' ? 0 : round === 3 ? 3 : round === 7 ? -2 : 0;
            return { queue: name, payload: { n }, priority, concurrencyKey: `k${String(n % 1_000).padStart(4, '0')}` };
          }),
        );
      }
    }
    await queue.enqueueMany(Array.from({ length: 2_000 }, (_, i) => ({ queue: KEYED, payload: { later: i }, priority: 9, delayMs: 86_400_000, concurrencyKey: `k${String(i % 1_000).padStart(4, '0')}` })));
    await db.query('VACUUM ANALYZE background_jobs');
  }, 180_000);
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  // $1 queue, $2 jobs wanted, $3 worker, $4 lease ms, $5 globalConcurrency, $6/$7 rate limit, $8 concurrencyPerKey, $9 key
  // cursor, then the keyed claim's $10 look for jobs without a key and $11 stored limits; the fair claim's $10 weights,
  // $11 default weight, $12 look, $13 started now, $14 buffer lease ms, $15 stored limits.
  const keyedValues = (queue: string, limit: number) => [queue, limit, 'w', 30_000, null, null, 0, 1, 'k0500', false, null];
  const fairValues = (queue: string, limit: number) => [queue, limit, 'w', 30_000, null, null, 0, null, 'k0500', '{}', 1, false, limit, 30_000, null];

  const explain = (name: 'claimKeyedJobs' | 'claimFairJobs', values: unknown[]) => explainClaim(db, SQL[name], values);
  const pages = (plan: string) => Number(/^\S.*\n\s+Buffers: shared hit=(\d+)/.exec(plan)?.[1]);

  /** The jobs the claim took, each with whether a due queued job of its key comes before it (priority DESC, run_at, id). */
  const claimOrder = (name: 'claimKeyedJobs' | 'claimFairJobs', values: unknown[]) =>
    inClaimTransaction(db, async (client) => {
      await client.query(SQL[name], values);
      const { rows } = await client.query<{ priority: number; passed_over: boolean }>(
        `SELECT j.priority, EXISTS (
           SELECT 1 FROM background_jobs AS o
           WHERE o.queue_name = j.queue_name AND o.concurrency_key = j.concurrency_key AND o.status = 'queued' AND o.run_at <= now()
             AND (o.priority > j.priority OR (o.priority = j.priority AND (o.run_at, o.id) < (j.run_at, j.id)))) AS passed_over
         FROM background_jobs AS j WHERE j.queue_name = $1 AND j.status = 'processing' AND j.locked_by = 'w'`,
        [values[0]],
      );
      return rows;
    });

  it.each(CLAIMS)('%s on %s, a claim of %i, takes each key’s highest priority due jobs first, none passed over', async (name, queue, limit) => {
    const values = name === 'claimKeyedJobs' ? keyedValues(queue, limit) : fairValues(queue, limit);
    const taken = await claimOrder(name, values);
    expect(taken).toHaveLength(limit);
    expect(taken.filter((t) => t.passed_over)).toEqual([]);
    // Every key of the table has due jobs of priority 3 (and the keyed queue's future ones of 9 are not due): they go first.
    expect(taken.map((t) => t.priority)).toEqual(Array.from({ length: limit }, () => 3));
  });

  it.each(CLAIMS)('%s on %s, a claim of %i, reads each key’s other priorities through their index, no more pages than without priorities', async (name, queue, limit) => {
    const values = name === 'claimKeyedJobs' ? keyedValues(queue, limit) : fairValues(queue, limit);
    const plan = await explain(name, values);
    if (process.env.PRINT_PLAN) console.log(plan);
    expect(plan).not.toMatch(/Seq Scan on background_jobs/);
    expect(plan).toMatch(/Index (?:Only )?Scan using background_jobs_key_priority_idx on background_jobs j\w* \(actual time=[\d.]+\.\.[\d.]+ rows=[1-9]/);
    // The same claim on a queue of the same shape whose jobs all have priority 0 (the walks of other priorities skipped).
    const flat = await explain(name, name === 'claimKeyedJobs' ? keyedValues('kp-flat', limit) : fairValues('kp-flat', limit));
    expect(flat).not.toMatch(/Scan using background_jobs_key_priority_idx on background_jobs j\w* \(actual/);
    // 1.1-1.26x on PostgreSQL 15 and 18 (pages vary a little from run to run): a walk of every key, or of a key's whole
    // backlog, would read many times more.
    expect(pages(plan)).toBeLessThanOrEqual(pages(flat) * 1.5);
  });
});
