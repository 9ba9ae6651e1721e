import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { MaintenanceScheduler } from '../src/internal.js';
import type { INestApplicationContext } from '@nestjs/common';
import { createTestDatabase } from '@internal/pg-harness';
import { SQL } from '../src/store/job.sql.js';
import { STATS_EXACT_LIMIT } from '../src/store/job-read.store.js';
import { explainBothModes, seqScans } from './support/plans.js';
import { sqlPool, startApp } from './support/test-app.js';

const FINISHED = 2_000_000;

/**
 * Issue 13 item 8: with millions of retained rows, each prune statement and stats() read the whole table. Both
 * must now read a bounded number of pages: asserted on EXPLAIN (ANALYZE, BUFFERS), prepared under both plan
 * cache modes (a named statement switches to the generic plan after five runs), and never on time.
 */
describe(`pruner and stats() on a table of ${FINISHED.toLocaleString('en')} finished jobs`, () => {
  let app: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    const url = await createTestDatabase('largetable');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false, completedRetentionMs: 86_400_000, failedRetentionMs: 86_400_000 } } });
    // Finished an hour ago (inside retention) across two queues, a few failed, and some live jobs.
    await db.query(
      `INSERT INTO background_jobs (queue_name, status, attempts, finished_at, created_at)
       SELECT CASE WHEN g % 4 = 0 THEN 'mail' ELSE 'thumbs' END, CASE WHEN g % 1000 = 0 THEN 'failed' ELSE 'completed' END::background_job_status,
              1, now() - interval '1 hour', now() - interval '2 hours'
       FROM generate_series(1, $1) AS g`,
      [FINISHED],
    );
    await db.query(`INSERT INTO background_jobs (queue_name) SELECT 'mail' FROM generate_series(1, 30)`);
    await db.query(`INSERT INTO background_jobs (queue_name, status, attempts, locked_by) SELECT 'thumbs', 'processing', 1, 'w' FROM generate_series(1, 7)`);
    await db.query('VACUUM ANALYZE background_jobs');
  }, 300_000);
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  const explain = (sql: string, types: string, args: string) => explainBothModes(db, sql, types, args);


  it('a prune statement with nothing past retention reads a few index pages, not the table', async () => {
    const plans = await explain(SQL.deleteFinishedBefore, 'background_job_status[], int8, int, int8', `'{completed}', 86400000, 1000, 86400000`);
    for (const [mode, { pages, all }] of Object.entries(plans)) {
      expect([mode, seqScans(all)]).toEqual([mode, []]);
      expect([mode, all.some((n) => n['Index Name'] === 'background_jobs_finished_idx')]).toEqual([mode, true]);
      expect([mode, pages < 50]).toEqual([mode, true]);
    }
  });

  it('a prune batch reads about the rows it deletes', async () => {
    // 2,000 rows past retention among the 2M that are not: a batch of 500 touches those, not the rest.
    const plans = await explain(SQL.deleteFinishedBefore, 'background_job_status[], int8, int, int8', `'{failed}', 1000, 500, 1000`);
    for (const [mode, { pages, all }] of Object.entries(plans)) {
      expect([mode, seqScans(all)]).toEqual([mode, []]);
      expect([mode, pages < 5_000]).toEqual([mode, true]);
    }
  });

  it('stats() reads a bounded number of pages: exact for small counts, estimated (and marked so) for the millions', async () => {
    const plans = await explain(SQL.countByStatus, 'int', String(STATS_EXACT_LIMIT));
    for (const [mode, { pages, all }] of Object.entries(plans)) {
      expect([mode, seqScans(all)]).toEqual([mode, []]);
      // Up to 10,001 heap rows per finished status and a few index pages per queue; the table has ~30,000 pages.
      expect([mode, pages < 2_500]).toEqual([mode, true]);
    }
    const sample = await explain(SQL.countSample, 'float8, float8', '5, 100');
    expect(sample.force_generic_plan.all.map((n) => n['Node Type'])).toContain('Sample Scan');

    const stats = await app.get(QueueService).stats();
    const completed = (FINISHED * 999) / 1000;
    expect(stats.mail).toMatchObject({ queued: 30, processing: 0, cancelled: 0, approximate: ['completed'] });
    expect(stats.thumbs).toMatchObject({ queued: 0, processing: 7, approximate: ['completed'] });
    expect(stats.mail.failed + stats.thumbs.failed).toBe(FINISHED / 1000);
    const completedEstimate = stats.mail.completed + stats.thumbs.completed;
    expect(completedEstimate).toBeGreaterThan(completed * 0.8);
    expect(completedEstimate).toBeLessThan(completed * 1.2);
    expect(stats.thumbs.completed / stats.mail.completed).toBeGreaterThan(2.4);
    expect(stats.thumbs.completed / stats.mail.completed).toBeLessThan(3.6);
  });

  it('the pruner deletes what is past retention through the index, and nothing else', async () => {
    await db.query(`UPDATE background_jobs SET finished_at = now() - interval '2 days' WHERE status = 'failed'`);
    const result = await app.get(MaintenanceScheduler).pruner.runOnce();
    expect(result).toEqual({ ran: true, completed: 0, failed: FINISHED / 1000, partitions: 0 });
  });
});

describe('stats() on a small table', () => {
  it('gives exact counts per queue and status, with no approximate field', async () => {
    const url = await createTestDatabase('smallstats');
    const db = sqlPool(url);
    const app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    try {
      await db.query(`
        INSERT INTO background_jobs (queue_name, status, finished_at, locked_by)
        SELECT q, s::background_job_status, CASE WHEN s IN ('completed', 'failed', 'cancelled') THEN now() END, CASE WHEN s = 'processing' THEN 'w' END
        FROM unnest('{a,b,b,c,c,c}'::text[]) AS q, unnest('{queued,queued,processing,completed,failed,cancelled,completed}'::text[]) AS s`);
      const { rows } = await db.query(`SELECT queue_name, status::text, count(*)::int AS n FROM background_jobs GROUP BY 1, 2`);
      const expected: Record<string, Record<string, unknown>> = {};
      for (const r of rows) (expected[r.queue_name] ??= { queued: 0, blocked: 0, processing: 0, completed: 0, failed: 0, cancelled: 0 })[r.status] = r.n;
      expect(await app.get(QueueService).stats()).toEqual(expected);
      expect(expected.c).toEqual({ queued: 6, blocked: 0, processing: 3, completed: 6, failed: 3, cancelled: 3 });
    } finally {
      await app.close();
      await db.end();
    }
  });
});
