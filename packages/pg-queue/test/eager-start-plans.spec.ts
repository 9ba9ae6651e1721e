import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import type { INestApplicationContext } from '@nestjs/common';
import { createTestDatabase } from '@internal/pg-harness';
import { SQL } from '../src/store/job.sql.js';
import { explainBothModes, seqScans } from './support/plans.js';
import { sqlPool, startApp } from './support/test-app.js';

const QUEUED = 1_000_000;

/**
 * The eager start's insert (insertEagerJob) looks for a due job waiting before the new one: one probe of the
 * claim index per priority at or above the job's, whatever the queue holds. Asserted on EXPLAIN (ANALYZE,
 * BUFFERS) with a million queued jobs in the queue (delayed, over five priorities, and a thousand due), prepared
 * under both plan cache modes, never on time. Each run is rolled back.
 */
describe(`eager start's insert on a queue of ${QUEUED.toLocaleString('en')} queued jobs`, () => {
  let app: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    const url = await createTestDatabase('eagerplans');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    // Delayed a day, priorities 0 to 4; then a thousand due now at priority 2, and a queue that has nothing queued.
    await db.query(
      `INSERT INTO background_jobs (queue_name, priority, run_at) SELECT 'big', g % 5, now() + interval '1 day' FROM generate_series(1, $1) AS g`,
      [QUEUED - 1_000],
    );
    await db.query(`INSERT INTO background_jobs (queue_name, priority) SELECT 'big', 2 FROM generate_series(1, 1000)`);
    await db.query(`INSERT INTO background_jobs (queue_name, status, attempts, finished_at) SELECT 'idle', 'completed', 1, now() FROM generate_series(1, 100000)`);
    await db.query('VACUUM ANALYZE background_jobs');
  }, 300_000);
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  const TYPES = 'text, jsonb, int, int, text, int, int, jsonb';
  const explainInsert = (queue: string, priority: number) => explainBothModes(db, SQL.insertEagerJob, TYPES, `'${queue}', '{}', ${priority}, 5, 'w', 5000, 30000, NULL`);

  for (const [queue, priority, what] of [
    ['big', 3, 'no due job at priority 3 or above (a million delayed ones)'],
    ['big', 0, 'due jobs at priority 2 ahead of it'],
    ['big', 5, 'a priority above every queued job'],
    ['idle', 0, 'a queue with nothing queued (100,000 finished)'],
  ] as const) {
    it(`reads a few index pages per priority, not the queue: ${what}`, async () => {
      const plans = await explainInsert(queue, priority);
      for (const [mode, { pages, all }] of Object.entries(plans)) {
        expect([mode, seqScans(all)]).toEqual([mode, []]);
        expect([mode, all.filter((n) => n['Relation Name'] === 'background_jobs' && n['Index Name'] !== undefined && n['Index Name'] !== 'background_jobs_claim_idx').map((n) => n['Index Name'])]).toEqual([mode, []]);
        // Five priorities at most, a probe or two of three levels each, the insert's own pages (heap and indexes).
        expect([mode, pages < 150]).toEqual([mode, true]);
      }
    });
  }

  it('claims where a claim would have: not behind a due job of its priority or higher', async () => {
    const client = await db.connect();
    try {
      const claimed = async (priority: number) => {
        await client.query('BEGIN');
        const { rows } = await client.query<{ claimed: boolean }>(SQL.insertEagerJob, ['big', '{}', priority, 5, 'w', 5_000, 30_000, null]);
        await client.query('ROLLBACK');
        return rows[0].claimed;
      };
      expect(await claimed(3)).toBe(true);
      expect(await claimed(2)).toBe(false);
      expect(await claimed(0)).toBe(false);
      expect(await claimed(5)).toBe(true);
    } finally {
      client.release();
    }
  });
});
