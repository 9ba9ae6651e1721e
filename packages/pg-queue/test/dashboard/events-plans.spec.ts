import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { DASHBOARD_EVENTS_SQL } from '../../src/store/dashboard-events.sql.js';
import { DASHBOARD_FAIRNESS_SQL } from '../../src/store/dashboard-fairness.sql.js';
import { EVENT_SCAN_WINDOW, JOB_EVENTS_SHOWN } from '../../src/store/dashboard-events.store.js';
import { WEIGHTS_SHOWN } from '../../src/store/dashboard-fairness.store.js';
import { nodes, type PlanNode } from '../support/plans.js';
import { sqlPool, startApp } from '../support/test-app.js';

const ROWS = 1_000_000;

/**
 * The events page, a job's events and the queue page's fair share reads on a million recorded events: every statement,
 * EXPLAINed with the values the dashboard sends (unnamed statements: planned with them), reads through an index, never a
 * Seq Scan of background_job_events, and reads at most its scan window of rows however little a filter matches.
 */
describe(`dashboard event reads on ${ROWS.toLocaleString('en')} events`, () => {
  let app: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    const url = await createTestDatabase('dasheventplans');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    // Ten events per transaction, one job per five events, three queues, over the last day (the newest last).
    await db.query(
      `INSERT INTO background_job_events (tx, type, job_id, queue_name, attempt, detail, created_at)
       SELECT (1000 + g / 10)::text::xid8, (ARRAY['enqueued', 'started', 'completed', 'failed', 'retrying'])[1 + g % 5], g / 5,
              (ARRAY['emails', 'thumbnails', 'sync'])[1 + (g / 5) % 3], 1, CASE WHEN g % 5 = 3 THEN 'Error: boom' END,
              now() - interval '1 day' + g * interval '86 milliseconds'
       FROM generate_series(1, $1) AS g`,
      [ROWS],
    );
    await db.query(`INSERT INTO background_queue_weights (queue_name, key, weight) SELECT 'sync', 'tenant-' || g, 1 + g % 9 FROM generate_series(1, 5000) AS g`);
    await db.query('VACUUM ANALYZE background_job_events');
    await db.query('VACUUM ANALYZE background_queue_weights');
  }, 600_000);

  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  const explain = async (sql: string, values: unknown[]): Promise<PlanNode[]> => {
    const { rows } = await db.query({ text: `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, values });
    return nodes(rows[0]['QUERY PLAN'][0].Plan as PlanNode);
  };
  const middle = { tx: String(1000 + ROWS / 20), id: String(ROWS / 2) };
  const page = (queue: string | null, type: string | null) => [queue, type, 50, EVENT_SCAN_WINDOW, true];
  const jobCreated = new Date(Date.now() - 12 * 3_600_000);

  const statements: [string, string, unknown[]][] = [
    ['the newest page', DASHBOARD_EVENTS_SQL.newest, page(null, null)],
    ['the newest page of a queue and a type', DASHBOARD_EVENTS_SQL.newest, page('sync', 'failed')],
    ['a filter that matches nothing', DASHBOARD_EVENTS_SQL.newest, page('nobody', null)],
    ['an older page', DASHBOARD_EVENTS_SQL.older, [...page('emails', null), middle.tx, middle.id]],
    ['a newer page', DASHBOARD_EVENTS_SQL.newer, [...page(null, 'dead'), middle.tx, middle.id]],
    ["the newest window's end", DASHBOARD_EVENTS_SQL.windowEndOlder, [null, null, EVENT_SCAN_WINDOW]],
    ["an older window's end", DASHBOARD_EVENTS_SQL.windowEndOlder, [middle.tx, middle.id, EVENT_SCAN_WINDOW]],
    ["a newer window's end", DASHBOARD_EVENTS_SQL.windowEndNewer, [middle.tx, middle.id, EVENT_SCAN_WINDOW]],
    ["a job's events", DASHBOARD_EVENTS_SQL.jobEvents, [String(ROWS / 10), jobCreated, EVENT_SCAN_WINDOW, true, JOB_EVENTS_SHOWN]],
    ['whether a window from the job on is full', DASHBOARD_EVENTS_SQL.busySince, [jobCreated, EVENT_SCAN_WINDOW]],
    ['the recording queues', DASHBOARD_EVENTS_SQL.recordingQueues, []],
    ['a fair queue seen (weights stored)', DASHBOARD_FAIRNESS_SQL.fairSeen, ['sync']],
    ['a fair queue seen (no weight stored)', DASHBOARD_FAIRNESS_SQL.fairSeen, ['emails']],
    ['the stored weights', DASHBOARD_FAIRNESS_SQL.weights, ['sync', WEIGHTS_SHOWN + 1]],
  ];

  // The weights: the planner may walk the small table from its start for an EXISTS that matches at once; what it reads is
  // bounded all the same (the rows read are checked).
  it.each(statements)('%s: no Seq Scan of the events, at most its window of rows read', async (_name, sql, values) => {
    const all = await explain(sql, values);
    const scans = all.filter((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'background_job_events');
    expect(scans.map((n) => n['Relation Name'])).toEqual([]);
    const read = (relation: string) => all.filter((n) => n['Relation Name'] === relation).map((n) => (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1));
    for (const rows of read('background_job_events')) expect(rows).toBeLessThanOrEqual(EVENT_SCAN_WINDOW);
    for (const rows of read('background_queue_weights')) expect(rows).toBeLessThanOrEqual(WEIGHTS_SHOWN + 1);
  });
});
