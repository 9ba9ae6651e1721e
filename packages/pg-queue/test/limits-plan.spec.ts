import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { SQL } from '../src/store/job.sql.js';
import { explainClaim } from './support/plans.js';
import { sqlPool, startApp } from './support/test-app.js';

// Plans of the limited claims on a table of 100,000 queued jobs: every read goes through an index, and the
// keyed claim visits only the keys it needs (not all 1,000 that have queued jobs).
describe('limited claim plans', () => {
  let app: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    const url = await createTestDatabase('limplan');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    const queue = app.get(QueueService);
    for (let c = 0; c < 10; c++) {
      await queue.enqueueMany(Array.from({ length: 5_000 }, (_, i) => ({ queue: 'keyed', payload: { i }, concurrencyKey: `k${(i + c * 5_000) % 1_000}` })));
    }
    await queue.enqueueMany(Array.from({ length: 50_000 }, (_, i) => ({ queue: 'lim', payload: { i } })));
    await db.query('ANALYZE background_jobs');
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  /** EXPLAIN ANALYZE of the claim inside the transaction it runs in, rolled back. */
  const explain = (name: 'claimLimitedJobs' | 'claimKeyedJobs', values: unknown[]) => explainClaim(db, SQL[name], values);

  it('claimLimitedJobs reads through indexes only', async () => {
    const plan = await explain('claimLimitedJobs', ['lim', 10, 'w', 30_000, 20, 100, 1_000, null]);
    expect(plan).not.toMatch(/Seq Scan on background_jobs/);
    expect(plan).toMatch(/Index Only Scan using background_jobs_limited_idx/);
  });

  it('claimKeyedJobs reads through indexes only and walks 10 of the 1,000 keys for a claim of 10', async () => {
    const plan = await explain('claimKeyedJobs', ['keyed', 10, 'w', 30_000, null, null, 0, 1, 'k500', true, null]);
    expect(plan).not.toMatch(/Seq Scan on background_jobs/);
    const walked = /CTE after\s+->\s+Recursive Union \(actual time=[\d.]+\.\.[\d.]+ rows=(\d+)/.exec(plan);
    expect(Number(walked?.[1])).toBeLessThanOrEqual(11);
    expect(plan).toMatch(/CTE upto\s+->\s+Recursive Union \(never executed\)/);
  });
});
