import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import type { INestApplicationContext } from '@nestjs/common';
import { createTestDatabase } from '@internal/pg-harness';
import { SQL } from '../src/store/job.sql.js';
import { sqlPool, startApp } from './support/test-app.js';

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

describe('claim query plan', () => {
  let app: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    const url = await createTestDatabase('plan');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false } });
    // 5,000 jobs in one transaction: they share one now() as run_at, the case that needs id in the index.
    const queue = app.get(QueueService);
    await queue.enqueueMany(Array.from({ length: 5_000 }, (_, i) => ({ queue: 'bulk', payload: { i } })));
    await queue.enqueueMany(Array.from({ length: 5_000 }, (_, i) => ({ queue: 'other', payload: { i }, priority: i % 3 })));
    await db.query('ANALYZE background_jobs');
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('reads the claim index in claim order: no Sort, no scan of the whole queue', async () => {
    const { rows } = await db.query(`EXPLAIN (FORMAT JSON) ${SQL.claimJobs}`, ['bulk', 50, 'explain', 30_000]);
    const all = nodes(rows[0]['QUERY PLAN'][0].Plan as PlanNode);
    const candidateScan = all.find((n) => n['Index Name'] === 'background_jobs_claim_idx');
    expect(candidateScan?.['Node Type']).toMatch(/Index/);
    expect(all.filter((n) => n['Node Type'] === 'Sort')).toEqual([]);
    expect(all.filter((n) => n['Node Type'] === 'Seq Scan')).toEqual([]);
  });

  it('touches about as many index rows as it claims (EXPLAIN ANALYZE, then rolled back)', async () => {
    const client = await db.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${SQL.claimJobs}`, ['bulk', 50, 'explain', 30_000]);
      await client.query('ROLLBACK');
      const scan = nodes(rows[0]['QUERY PLAN'][0].Plan as PlanNode).find((n) => n['Index Name'] === 'background_jobs_claim_idx') as PlanNode & {
        'Actual Rows': number;
      };
      expect(scan['Actual Rows']).toBeLessThanOrEqual(51);
    } finally {
      client.release();
    }
  });
});
