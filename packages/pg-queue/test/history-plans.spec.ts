import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { ADMIN_SQL } from '../src/store/admin.sql.js';
import { DASHBOARD_SQL } from '../src/store/dashboard.sql.js';
import { CHART_ROW_CAP, DASHBOARD_EXACT_LIMIT, LIST_SCAN_WINDOW } from '../src/store/dashboard.store.js';
import { FLOW_SQL } from '../src/store/flow.sql.js';
import { HISTORY_SQL } from '../src/store/history.sql.js';
import { SQL } from '../src/store/job.sql.js';
import { METRICS_SQL } from '../src/store/metrics.sql.js';
import { WAIT_SQL } from '../src/store/wait.sql.js';
import { sqlPool, startApp } from './support/test-app.js';

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Plans?: PlanNode[];
}

const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

const HISTORY_ROWS = 1_000_000;
const HOT_ROWS = 100_000;

/**
 * Partitioned history (README: "Long retention: partitioned history"): every statement that reads through the view
 * background_jobs_all, and the mover's and retry's own, EXPLAINed with the values the app sends on a million jobs
 * in history (ten daily partitions of each kind) beside a hundred thousand in background_jobs. No plan may scan a
 * table whole: each reaches history through its id, finish-time or flow index, or through partition pruning.
 */
describe(`statements that read history, on ${HISTORY_ROWS.toLocaleString('en')} moved jobs`, () => {
  let app: INestApplicationContext;
  let db: pg.Pool;
  const someId = String(HISTORY_ROWS / 2);

  beforeAll(async () => {
    const url = await createTestDatabase('historyplans');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    // Ten partitions of a whole day each, ending at `end`, not at midnight: a partition of today was as full as the time
    // of day, and before noon UTC the planner rightly read its few rows whole (and the oldest rows had no partition).
    const end = ((await db.query(`SELECT now()::text AS t`)).rows[0] as { t: string }).t;
    for (const kind of ['completed', 'failed']) {
      for (let d = 0; d < 10; d++) {
        await db.query(`
          DO $$ DECLARE lo timestamptz := '${end}'::timestamptz - ${d + 1} * interval '1 day'; BEGIN
            EXECUTE format('CREATE TABLE background_jobs_history_${kind}_p%s (LIKE background_jobs_history_${kind})', to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD'));
            EXECUTE format('ALTER TABLE background_jobs_history_${kind} ATTACH PARTITION background_jobs_history_${kind}_p%s FOR VALUES FROM (%L) TO (%L)',
                           to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD'), lo, lo + interval '1 day');
          END $$`);
      }
    }
    // History: ids 1..1M, finished over the 9.5 days before `end`, 10 % failed (more per partition than the counts' cap
    // of 10,000, so that reading one status's newest rows through the index is the plan to beat), every 1000th of a finished flow.
    await db.query(
      `INSERT INTO background_jobs_history (id, queue_name, payload, status, priority, run_at, attempts, max_attempts, fence_token, created_at, updated_at,
                                            finished_at, last_error, result, buffered, flow_id)
       SELECT g, (ARRAY['emails', 'thumbnails', 'sync'])[1 + g % 3], jsonb_build_object('n', g),
              CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'completed' END::background_job_status, 0, t, 1, 3, 1, t, t, t,
              CASE WHEN g % 10 = 0 THEN 'Error: boom' END, '{"ok": true}', false, CASE WHEN g % 1000 = 1 THEN 1 END
       FROM (SELECT g, $2::timestamptz - (g::float8 / $1) * interval '9.5 days' AS t FROM generate_series(1, $1) AS g) AS s`,
      [HISTORY_ROWS, end],
    );
    await db.query(`SELECT setval(pg_get_serial_sequence('background_jobs', 'id'), $1)`, [HISTORY_ROWS]);
    // background_jobs: queued, running and just-finished jobs after them.
    await db.query(
      `INSERT INTO background_jobs (queue_name, payload, status, attempts, run_at, finished_at, locked_by)
       SELECT (ARRAY['emails', 'thumbnails', 'sync'])[1 + g % 3], '{}', s.status::background_job_status, 0, now(),
              CASE WHEN s.status = 'completed' THEN now() END, CASE WHEN s.status = 'processing' THEN 'worker-1' END
       FROM generate_series(1, $1) AS g,
            LATERAL (SELECT CASE WHEN g % 10 = 0 THEN 'completed' WHEN g % 500 = 1 THEN 'processing' ELSE 'queued' END AS status) AS s`,
      [HOT_ROWS],
    );
    await db.query(`INSERT INTO background_flows (id, name, status, finished_at) VALUES (1, 'done', 'completed', now() - interval '2 days')`);
    await db.query('VACUUM ANALYZE background_jobs');
    await db.query('ANALYZE background_jobs_history');
  }, 600_000);

  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  /** The sequential scans of a statement's plan on background_jobs or a history partition. */
  async function seqScans(sql: string, values: unknown[]): Promise<string[]> {
    const { rows } = await db.query({ text: `EXPLAIN (FORMAT JSON) ${sql}`, values });
    return nodes(rows[0]['QUERY PLAN'][0].Plan as PlanNode)
      .filter((n) => n['Node Type'] === 'Seq Scan' && /^background_jobs(_history_.*)?$/.test(n['Relation Name'] ?? ''))
      .map((n) => `Seq Scan on ${n['Relation Name']}`);
  }

  const maxId = String(HISTORY_ROWS + HOT_ROWS + 1);
  const listFrom = (to: string) => String(Number(to) - LIST_SCAN_WINDOW);
  const adminFilter = (afterId: string | null, ids: string[] | null, queue: string | null, statuses: string[]) => [afterId, ids, queue, statuses, null, null, 500, null];

  const statements: [string, string, unknown[]][] = [
    ['get(id)', SQL.getJob, [someId]],
    ['waitFor: mark and read', SQL.markAwaited, [someId]],
    ['waitFor: outcomes', SQL.jobOutcomes, [[someId, '7', maxId]]],
    ['cancel of a moved job', SQL.cancelJob, [someId]],
    ['stats: counts by status', SQL.countByStatus, [DASHBOARD_EXACT_LIMIT]],
    ['metrics: depth', METRICS_SQL.depthSnapshot, [10_000, 1_000]],
    ['whyNotRunning of a moved job', WAIT_SQL.jobWaitFacts, [someId]],
    ['dashboard: newest id', DASHBOARD_SQL.maxId, []],
    ['dashboard: finished per minute', DASHBOARD_SQL.finishedPerMinute, [CHART_ROW_CAP]],
    ['dashboard: jobs, first page', DASHBOARD_SQL.listJobs, [maxId, listFrom(maxId), null, null, 50, true, null, null]],
    ['dashboard: failed jobs in history', DASHBOARD_SQL.listJobs, [String(HISTORY_ROWS / 2), listFrom(String(HISTORY_ROWS / 2)), null, 'failed', 50, true, null, null]],
    ['dashboard: job detail', DASHBOARD_SQL.jobDetail, [someId]],
    ['dashboard: a flow of moved jobs', DASHBOARD_SQL.flowJobs, ['1', '0', 50, 5]],
    ['flows: getFlow', FLOW_SQL.getFlow, ['1']],
    ['pruner: finished flows', FLOW_SQL.deleteFinishedFlows, [86_400_000, 500]],
    ['cli: list failed of a queue, oldest first', ADMIN_SQL.listJobsOldest, adminFilter('0', null, 'emails', ['failed'])],
    ['cli: list failed of a queue, newest first', ADMIN_SQL.listJobsNewest, adminFilter(null, null, 'emails', ['failed'])],
    ['cli: count completed', ADMIN_SQL.countJobs, adminFilter('0', null, null, ['completed'])],
    ['cli: existing ids', ADMIN_SQL.existingIds, [[someId]]],
    ['retry: bring one back', HISTORY_SQL.bringBack, [[someId]]],
    ['bulk retry: bring a batch back', ADMIN_SQL.bringBackJobs, adminFilter('0', null, 'sync', ['failed'])],
    ['bulk delete: a batch of history', ADMIN_SQL.deleteHistoryJobs, [...adminFilter('0', null, 'sync', ['completed']), null]],
    ['mover: candidates', HISTORY_SQL.moveCandidates, [0, 5_000, 'day', 86_400_000, null]],
    ['mover: move', HISTORY_SQL.moveJobs, [['999999'], [new Date().toISOString()], 86_400_000, null]],
  ];

  it.each(statements)('%s: no sequential scan of background_jobs or of a history partition', async (_name, sql, values) => {
    expect(await seqScans(sql, values)).toEqual([]);
  });

  it("a queue page's times read the last day of history through the finish-time index, or a partition whole only when it holds fewer rows than the cap", async () => {
    // The last day's failed partition holds ~10,500 rows, all in the range and under the cap (50,000): the planner rightly
    // reads it whole and sorts it. A partition past the cap must be read newest first through its index, never whole.
    const scanned = await seqScans(DASHBOARD_SQL.queueTimes, ['sync', CHART_ROW_CAP]);
    expect(scanned.filter((s) => s === 'Seq Scan on background_jobs')).toEqual([]);
    for (const scan of scanned) {
      const table = scan.replace('Seq Scan on ', '');
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
      expect([table, rows[0].n < CHART_ROW_CAP]).toEqual([table, true]);
    }
  });

  it('the estimate above the cap samples history (TABLESAMPLE) rather than reading it', async () => {
    const { rows } = await db.query({ text: `EXPLAIN (FORMAT JSON) ${SQL.countSample}`, values: [5, 0.5] });
    const all = nodes(rows[0]['QUERY PLAN'][0].Plan as PlanNode);
    expect(all.filter((n) => n['Node Type'] === 'Seq Scan' && /^background_jobs/.test(n['Relation Name'] ?? ''))).toEqual([]);
    expect(all.filter((n) => n['Node Type'] === 'Sample Scan' && /^background_jobs_history_/.test(n['Relation Name'] ?? '')).length).toBe(20);
  });
});
