import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { METRICS_SQL } from '../src/store/metrics.sql.js';
import { MetricsStore } from '../src/store/metrics.store.js';
import { explainBothModes, seqScans, type PlanNode } from './support/plans.js';
import { sqlPool, startApp } from './support/test-app.js';

const ROWS = 1_000_000;

/**
 * The depth query of a metrics scrape and the lag query of a health check, on a table of 1M jobs: neither may
 * read background_jobs sequentially (EXPLAIN ANALYZE under both plan cache modes), their reads stay bounded, and
 * the estimate's sample runs only when a count is over the exact limit. Asserted on plans and pages, never on time.
 */
describe(`metrics and health queries on a table of ${ROWS.toLocaleString('en')} jobs`, () => {
  let app: INestApplicationContext;
  let db: pg.Pool;
  let tablePages = 0;

  beforeAll(async () => {
    const url = await createTestDatabase('metricsplan');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    // 65% finished across two queues (some failed and cancelled), 30% queued over three priorities (due, some
    // delayed), 0.5% in flight (a fifth of them buffered: read ahead by a worker, not started, due a minute ago),
    // and a queue of three jobs.
    await db.query(
      `INSERT INTO background_jobs (queue_name, status, attempts, finished_at, created_at)
       SELECT CASE WHEN g % 4 = 0 THEN 'mail' ELSE 'thumbs' END,
              CASE WHEN g % 50 = 0 THEN 'failed' WHEN g % 333 = 0 THEN 'cancelled' ELSE 'completed' END::background_job_status,
              1, now() - interval '1 hour', now() - interval '2 hours'
       FROM generate_series(1, $1) AS g`,
      [ROWS * 0.65],
    );
    await db.query(
      `INSERT INTO background_jobs (queue_name, priority, run_at, created_at)
       SELECT 'mail', (g % 3) * 5, now() - g * interval '1 ms', now() - g * interval '1 ms' - CASE WHEN g % 2 = 0 THEN interval '1 s' ELSE interval '0' END
       FROM generate_series(1, $1) AS g`,
      [ROWS * 0.3],
    );
    await db.query(`INSERT INTO background_jobs (queue_name, run_at) SELECT 'thumbs', now() + interval '1 hour' FROM generate_series(1, $1)`, [ROWS * 0.045]);
    await db.query(
      `INSERT INTO background_jobs (queue_name, status, attempts, locked_by, buffered, run_at)
       SELECT 'thumbs', 'processing', CASE WHEN g % 5 = 0 THEN 0 ELSE 1 END, 'w' || (g % 3), g % 5 = 0, now() - CASE WHEN g % 5 = 0 THEN interval '1 min' ELSE interval '0' END
       FROM generate_series(1, $1) AS g`,
      [ROWS * 0.005],
    );
    await db.query(`INSERT INTO background_jobs (queue_name) SELECT 'tiny' FROM generate_series(1, 3)`);
    await db.query('VACUUM ANALYZE background_jobs');
    tablePages = (await db.query<{ n: number }>(`SELECT (pg_relation_size('background_jobs') / current_setting('block_size')::int)::int AS n`)).rows[0].n;
  }, 300_000);
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  const explain = (sql: string, types: string, args: string) => explainBothModes(db, sql, types, args);

  const sampleScans = (all: PlanNode[]) => all.filter((n) => n['Node Type'] === 'Sample Scan');

  it('the depth query, with counts over the exact limit (estimated from a sample): no sequential scan, fewer pages than the table', async () => {
    const plans = await explain(METRICS_SQL.depthSnapshot, 'int, int', '10000, 1000');
    for (const [mode, { all, pages }] of Object.entries(plans)) {
      expect([mode, seqScans(all)]).toEqual([mode, []]);
      expect([mode, sampleScans(all).map((n) => n['Actual Loops'])]).toEqual([mode, [1]]);
      expect([mode, pages < tablePages]).toEqual([mode, true]);
    }
    // With a lower exact limit the read shrinks with it: bounded by the limit, not by the table.
    const small = await explain(METRICS_SQL.depthSnapshot, 'int, int', '1000, 1000');
    for (const [mode, { all, pages }] of Object.entries(small)) {
      expect([mode, seqScans(all)]).toEqual([mode, []]);
      expect([mode, pages < tablePages / 3]).toEqual([mode, true]);
    }
  });

  it('the depth query samples nothing when every count is under the exact limit', async () => {
    const plans = await explain(METRICS_SQL.depthSnapshot, 'int, int', '10000000, 1000');
    for (const [mode, { all }] of Object.entries(plans)) {
      expect([mode, seqScans(all)]).toEqual([mode, []]);
      // Planned, never run: the one-time filter on `over` keeps the sample's subtree from starting.
      expect([mode, sampleScans(all).map((n) => n['Actual Loops'])]).toEqual([mode, [0]]);
    }
  });

  it('the lag query reads a few index pages per queue and priority', async () => {
    const plans = await explain(METRICS_SQL.oldestDue, '', '');
    for (const [mode, { all, pages }] of Object.entries(plans)) {
      expect([mode, seqScans(all)]).toEqual([mode, []]);
      expect([mode, pages < 200]).toEqual([mode, true]);
    }
  });

  it('the snapshot it returns: exact counts where under the limit, estimates above it, and each queue’s lag', async () => {
    const store = new MetricsStore(db);
    const { queues } = await store.depthSnapshot(10_000, 1_000, 30_000);
    expect(queues.tiny.counts).toEqual({ queued: 3, blocked: 0, processing: 0, completed: 0, failed: 0, cancelled: 0 });
    expect(queues.tiny.approximate).toEqual([]);
    // Buffered jobs count as queued, not running.
    expect(queues.thumbs.counts.processing).toBe(ROWS * 0.004);
    expect(queues.mail.approximate).toContain('queued');
    expect(queues.thumbs.approximate).toContain('completed');
    // An estimate of 300,000 queued from a sample of ~1,000 pages: the right order of magnitude, never below the exact limit.
    expect(queues.mail.counts.queued).toBeGreaterThan(10_000);
    expect(queues.mail.counts.queued).toBeLessThan(3_000_000);
    expect(queues.mail.oldestDueMs).toBeGreaterThanOrEqual(ROWS * 0.3 - 1);
    // thumbs' queued jobs are for later: its lag is its buffered jobs' (due a minute ago).
    expect(queues.thumbs.oldestDueMs).toBeGreaterThanOrEqual(59_000);
    // With a limit above every count, every count is exact: equal to a full count of the table.
    const exact = await store.depthSnapshot(10_000_000, 1_000, 30_000);
    const { rows } = await db.query<{ queue_name: string; status: string; n: number }>(
      `SELECT queue_name, CASE WHEN status = 'processing' AND buffered THEN 'queued' ELSE status::text END AS status, count(*)::int AS n FROM background_jobs GROUP BY 1, 2`,
    );
    for (const r of rows) expect([r.queue_name, r.status, exact.queues[r.queue_name].counts[r.status as 'queued']]).toEqual([r.queue_name, r.status, r.n]);
    expect(exact.queues.mail.approximate).toEqual([]);
    const lags = await store.oldestDue(5_000);
    expect(lags).toEqual({ mail: expect.any(Number), thumbs: expect.any(Number), tiny: expect.any(Number) });
    expect(lags.thumbs).toBeGreaterThanOrEqual(59_000);
  });
});
