import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { ADMIN_SQL } from '../src/store/admin.sql.js';
import { DASHBOARD_SQL } from '../src/store/dashboard.sql.js';
import { CHART_ROW_CAP, DASHBOARD_EXACT_LIMIT, FLOW_JOB_COUNT_CAP, LIST_SCAN_WINDOW, SCHEDULED_COUNT_CAP, SEARCH_CHUNK, WAITING_REFS_SHOWN } from '../src/store/dashboard.store.js';
import { FLOW_SQL } from '../src/store/flow.sql.js';
import { SQL } from '../src/store/job.sql.js';
import { WAIT_SQL } from '../src/store/wait.sql.js';
import { INSTANCE_SQL } from '../src/store/instance.sql.js';
import { INSTANCE_LIST_CAP } from '../src/store/instance.store.js';
import { GRAPH_EDGE_CAP, GRAPH_NODE_CAP } from '../src/dashboard/views/flow-graph.js';
import { QueueService, type EnqueuedFlow } from 'nestjs-pg-queue';
import { explainBothModes } from './support/plans.js';
import { sqlPool, startApp } from './support/test-app.js';

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

const ROWS = 1_000_000;
const someId = String(ROWS / 2);

/**
 * Issue 10: a dashboard page never scans background_jobs. Every statement each page (and each action) runs is
 * EXPLAINed, with the values the dashboard sends (unnamed statements: planned with them), on a table of a
 * million rows, and no plan may hold a Seq Scan of it. Plans, not timings: the benchmark
 * (test/dashboard/bench-dashboard.mjs) times the pages.
 */
describe(`dashboard statements on ${ROWS.toLocaleString('en')} jobs`, () => {
  let app: INestApplicationContext;
  let db: pg.Pool;
  let flow: EnqueuedFlow;

  beforeAll(async () => {
    const url = await createTestDatabase('dashplans');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    // Three queues: mostly completed in the last day (a tenth in the last hour), 1 % failed, some queued (some
    // delayed, all with unique keys), a few running.
    await db.query(
      `INSERT INTO background_jobs (queue_name, payload, status, attempts, run_at, finished_at, created_at, locked_by, unique_key, last_error)
       SELECT (ARRAY['emails', 'thumbnails', 'sync'])[1 + g % 3], jsonb_build_object('n', g),
              s.status::background_job_status, CASE WHEN s.status = 'queued' THEN 0 ELSE 1 END,
              CASE WHEN s.status = 'queued' AND g % 7 = 0 THEN now() + interval '1 hour' ELSE now() - interval '2 hours' END,
              CASE WHEN s.status IN ('completed', 'failed') THEN now() - (g % 1440 || ' minutes')::interval END,
              now() - interval '1 day',
              CASE WHEN s.status = 'processing' THEN 'worker-1' END,
              CASE WHEN s.status = 'queued' THEN 'key-' || g END,
              CASE WHEN s.status = 'failed' THEN 'Error: boom' END
       FROM generate_series(1, $1) AS g,
            LATERAL (SELECT CASE WHEN g % 100 = 0 THEN 'failed' WHEN g % 50 = 1 THEN 'queued' WHEN g = 77777 THEN 'processing' ELSE 'completed' END AS status) AS s`,
      [ROWS],
    );
    // A flow of 10,000 jobs after them (a root and its fan-out), and a thousand small finished flows: the flow pages'
    // statements must read a flow's rows through the flow index, not the primary key up to them.
    flow = await app.get(QueueService).enqueueFlow({
      name: 'fan-out',
      jobs: [{ ref: 'root', queue: 'sync', payload: {} }, ...Array.from({ length: 9_999 }, (_, i) => ({ ref: `part-${i}`, queue: 'sync', payload: {}, dependsOn: ['root'] }))],
    });
    await db.query(`INSERT INTO background_flows (name, status, finished_at) SELECT 'small-' || g, 'completed', now() FROM generate_series(1, 1000) AS g`);
    await db.query('VACUUM ANALYZE background_jobs');
    await db.query('VACUUM ANALYZE background_flows');
    await db.query('VACUUM ANALYZE background_job_deps');
  }, 600_000);

  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  /** The sequential scans of `relations` among a plan's nodes, as "Seq Scan on <relation>". */
  const seqScansOf = (all: PlanNode[], relations: readonly string[]) =>
    all.filter((n) => n['Node Type'] === 'Seq Scan' && relations.includes(n['Relation Name'] ?? '')).map((n) => `Seq Scan on ${n['Relation Name']}`);

  async function seqScans(sql: string, values: unknown[]): Promise<string[]> {
    const { rows } = await db.query({ text: `EXPLAIN (FORMAT JSON) ${sql}`, values });
    return seqScansOf(nodes(rows[0]['QUERY PLAN'][0].Plan as PlanNode), ['background_jobs']);
  }

  const maxId = String(ROWS + 1);
  const from = String(ROWS + 1 - LIST_SCAN_WINDOW);
  const adminFilter = (afterId: string, ids: string[] | null, queue: string | null, statuses: string[], when: string | null = null) => [afterId, ids, queue, statuses, null, null, 500, when];

  const statements: [string, string, unknown[]][] = [
    ['overview + summary: counts by status', SQL.countByStatus, [DASHBOARD_EXACT_LIMIT]],
    ['overview + summary: the estimate above the cap', SQL.countSample, [4.3, 100]],
    ['overview: paused queues', DASHBOARD_SQL.pausedQueues, []],
    ['overview: oldest due job per queue', DASHBOARD_SQL.oldestDue, [['emails', 'thumbnails', 'sync']]],
    ['overview: finished per minute (chart)', DASHBOARD_SQL.finishedPerMinute, [CHART_ROW_CAP]],
    ['queue page: throughput, wait and run percentiles of the last hour and day', DASHBOARD_SQL.queueTimes, ['sync', CHART_ROW_CAP]],
    ['jobs: newest id', DASHBOARD_SQL.maxId, []],
    ['jobs: no filter', DASHBOARD_SQL.listJobs, [maxId, from, null, null, 50, true, null, null]],
    ['jobs: one queue', DASHBOARD_SQL.listJobs, [maxId, from, 'sync', null, 50, true, null, null]],
    ['jobs: failed', DASHBOARD_SQL.listJobs, [maxId, from, null, 'failed', 50, true, null, null]],
    ['jobs: queued of one queue', DASHBOARD_SQL.listJobs, [maxId, from, 'emails', 'queued', 50, true, null, null]],
    ['jobs: due of one queue', DASHBOARD_SQL.listJobs, [maxId, from, 'emails', 'queued', 50, true, 'due', null]],
    ['jobs: scheduled of every queue', DASHBOARD_SQL.listJobs, [maxId, from, null, 'queued', 50, true, 'scheduled', null]],
    ['jobs: running (rare), second page', DASHBOARD_SQL.listJobs, [from, String(Number(from) - LIST_SCAN_WINDOW), null, 'processing', 50, false, null, null]],
    ['jobs: search by id', DASHBOARD_SQL.listJobs, [String(Number(someId) + 1), String(Number(someId) + 1 - LIST_SCAN_WINDOW), null, null, 1, true, null, null]],
    ['jobs, oldest first: the first page of one queue', DASHBOARD_SQL.listJobsOldest, [String(1 + LIST_SCAN_WINDOW), '1', 'sync', null, 50, true, null, null]],
    ['jobs, oldest first: failed, a later page', DASHBOARD_SQL.listJobsOldest, [String(Number(from) + LIST_SCAN_WINDOW), from, null, 'failed', 50, false, null, null]],
    ['jobs: a chunk of a payload and error search', DASHBOARD_SQL.listJobs, [maxId, String(ROWS + 1 - SEARCH_CHUNK), null, null, 50, true, null, 'boom']],
    ['overview: scheduled jobs per queue', DASHBOARD_SQL.scheduledCounts, [['emails', 'thumbnails', 'sync'], SCHEDULED_COUNT_CAP]],
    ['jobs: search by unique key, any queue', DASHBOARD_SQL.findByUniqueKey, ['key-51', null, true]],
    ['jobs: search by unique key in a queue', DASHBOARD_SQL.findByUniqueKey, ['key-51', 'emails', true]],
    ['job detail', DASHBOARD_SQL.jobDetail, [someId]],
    // Why a queued job is not running (id 50001 is queued: g % 50 = 1): the running jobs, the key holders, the open
    // parents and the due jobs ahead of it, each through its index.
    ['job page: why a queued job is not running', WAIT_SQL.jobWaitFacts, ['50001']],
    ['job page: why a finished job is not running', WAIT_SQL.jobWaitFacts, [someId]],
    ['action: retry one job', ADMIN_SQL.retryJobs, adminFilter('0', [someId], null, ['failed', 'cancelled'])],
    ['action: bulk retry failed of a queue', ADMIN_SQL.retryJobs, adminFilter('0', null, 'emails', ['failed'])],
    ['action: bulk cancel queued', ADMIN_SQL.cancelJobs, adminFilter('0', null, null, ['queued', 'processing'])],
    ['action: bulk delete completed of a queue', ADMIN_SQL.deleteJobs, adminFilter('0', null, 'sync', ['completed'])],
    ['action: bulk run now (promote)', ADMIN_SQL.changeJobs, [...adminFilter('0', null, 'emails', ['queued']), null, true, null, null, false, null]],
    ['action: bulk priority of the scheduled jobs of a queue', ADMIN_SQL.changeJobs, [...adminFilter('0', null, 'emails', ['queued'], 'scheduled'), 5, false, null, null, false, null]],
    ['job changes: one job (updatePayload)', SQL.changeJob, [someId, null, false, null, null, true, '{"a":1}', 'emails']],
    ['action: bulk cancel of the scheduled jobs of a queue', ADMIN_SQL.cancelJobs, adminFilter('0', null, 'emails', ['queued'], 'scheduled')],
    ['action: retry of ticked jobs', ADMIN_SQL.retryJobs, adminFilter('0', [someId, String(Number(someId) + 1)], null, ['failed', 'cancelled'])],
  ];

  it.each(statements)('%s: no sequential scan of background_jobs', async (_name, sql, values) => {
    expect(await seqScans(sql, values)).toEqual([]);
  });

  /** How a statement reads background_jobs and background_job_deps: "<node> <relation> [index] [condition]". */
  async function reads(sql: string, values: unknown[]): Promise<string[]> {
    const { rows } = await db.query({ text: `EXPLAIN (FORMAT JSON) ${sql}`, values });
    return nodes(rows[0]['QUERY PLAN'][0].Plan as PlanNode & { 'Index Cond'?: string })
      .filter((n) => /^background_job(s|_deps)$/.test(n['Relation Name'] ?? '') || /^background_job(s|_deps)_/.test(n['Index Name'] ?? ''))
      .map((n) => [n['Node Type'], n['Relation Name'], n['Index Name'], (n as { 'Index Cond'?: string })['Index Cond']].filter(Boolean).join(' '));
  }

  it('the flow pages read a flow through the flow and edge indexes: no sequential scan, no walk of the primary key to the flow', async () => {
    const first = (await db.query<{ id: string }>('SELECT min(id)::text AS id FROM background_jobs WHERE flow_id = $1', [flow.id])).rows[0].id;
    const drawn = Array.from({ length: GRAPH_NODE_CAP }, (_, i) => String(BigInt(first) + BigInt(i)));
    const flowStatements: [string, string, unknown[]][] = [
      ['flows: newest id', DASHBOARD_SQL.maxFlowId, []],
      ['flows: newest first', DASHBOARD_SQL.listFlows, [String(Number(flow.id) + 2000), '1', null, 50, FLOW_JOB_COUNT_CAP]],
      ['flows: running', DASHBOARD_SQL.listFlows, [String(Number(flow.id) + 2000), '1', 'running', 50, FLOW_JOB_COUNT_CAP]],
      ['flow: header and counts', DASHBOARD_SQL.flowHeader, [flow.id, FLOW_JOB_COUNT_CAP + 1]],
      ['flow: the drawn jobs', DASHBOARD_SQL.flowJobs, [flow.id, '0', GRAPH_NODE_CAP + 1, WAITING_REFS_SHOWN]],
      ['flow: a later page of its jobs', DASHBOARD_SQL.flowJobs, [flow.id, String(BigInt(first) + 5000n), 50, WAITING_REFS_SHOWN]],
      ['flow: the drawn edges', DASHBOARD_SQL.flowEdges, [drawn, GRAPH_EDGE_CAP + 1]],
      ['job page: its flow', DASHBOARD_SQL.jobFlow, [flow.id, flow.jobs['part-7'], WAITING_REFS_SHOWN]],
      ['action: cancel a flow', FLOW_SQL.cancelFlow, [flow.id]],
    ];
    const found: Record<string, string[]> = {};
    for (const [name, sql, values] of flowStatements) found[name] = await reads(sql, values);
    // A sequential scan, the primary key read as a range (to find the flow's rows by id order) rather than looked up by
    // one id (a parent of a blocked job, the job of the job page), or every flow's jobs above an id through (status, id).
    const bad = Object.entries(found).filter(([, list]) =>
      list.some((r) => r.startsWith('Seq Scan') || (r.includes('background_jobs_pkey') && !/\(id = /.test(r)) || r.includes('background_jobs_flow_status_idx')),
    );
    expect(bad).toEqual([]);
    // The flow's own jobs come through the flow index (flow_id, status), whatever the page.
    for (const name of ['flow: header and counts', 'flow: the drawn jobs', 'flow: a later page of its jobs', 'flows: newest first']) {
      expect([name, found[name].some((r) => r.includes('background_jobs_flow_idx'))]).toEqual([name, true]);
    }
  });

  it('the oldest due job per queue, from one index entry per priority, is the oldest the table holds', async () => {
    // sync: a few jobs of a higher priority, and its oldest due job behind them, at priority 0.
    await db.query(`UPDATE background_jobs SET priority = 5 WHERE id IN (SELECT id FROM background_jobs WHERE status = 'queued' AND queue_name = 'sync' ORDER BY id DESC LIMIT 10)`);
    await db.query(`UPDATE background_jobs SET run_at = now() - interval '3 hours' WHERE id = (SELECT min(id) FROM background_jobs WHERE status = 'queued' AND queue_name = 'sync' AND run_at < now())`);
    // emails: its oldest due job sits in a worker's read-ahead buffer (claimed, not started): it waits too.
    await db.query(`INSERT INTO background_jobs (queue_name, status, buffered, locked_by, lease_expires_at, run_at) VALUES ('emails', 'processing', true, 'worker-2', now() + interval '5 s', now() - interval '5 hours')`);
    // Both reads in one transaction, so that now() (the transaction's start) is the same instant for both: ages read
    // a moment apart could round to different seconds.
    const client = await db.connect();
    let rows: { queue_name: string; age_ms: string | null }[];
    let truth: { queue_name: string; age_ms: string | null }[];
    try {
      await client.query('BEGIN');
      ({ rows } = await client.query<{ queue_name: string; age_ms: string | null }>({ text: DASHBOARD_SQL.oldestDue, values: [['emails', 'thumbnails', 'sync', 'none']] }));
      ({ rows: truth } = await client.query<{ queue_name: string; age_ms: string | null }>(
        `SELECT queue_name, CASE WHEN min(run_at) <= now() THEN (extract(epoch FROM now() - min(run_at)) * 1000)::int8 END AS age_ms
         FROM background_jobs WHERE status = 'queued' OR (status = 'processing' AND buffered) GROUP BY queue_name`,
      ));
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const byQueue = (list: { queue_name: string; age_ms: string | null }[]) => Object.fromEntries(list.map((r) => [r.queue_name, r.age_ms === null ? null : Math.round(Number(r.age_ms) / 1000)]));
    expect(byQueue(rows)).toEqual({ ...byQueue(truth), none: null });
    expect(byQueue(rows).sync).toBeGreaterThanOrEqual(3 * 3600);
    expect(byQueue(rows).emails).toBeGreaterThanOrEqual(5 * 3600);
  });

  it('the scheduled jobs per queue, counted through the claim index a priority at a time, are the ones the table holds', async () => {
    const { rows } = await db.query<{ queue_name: string; n: number }>({ text: DASHBOARD_SQL.scheduledCounts, values: [['emails', 'thumbnails', 'sync', 'none'], SCHEDULED_COUNT_CAP] });
    const { rows: truth } = await db.query<{ queue_name: string; n: number }>(`SELECT queue_name, count(*)::int AS n FROM background_jobs WHERE status = 'queued' AND run_at > now() GROUP BY 1`);
    const byQueue = (list: { queue_name: string; n: number }[]) => Object.fromEntries(list.map((r) => [r.queue_name, r.n]));
    expect(byQueue(rows)).toEqual({ ...byQueue(truth), none: 0 });
    // Several priorities in 'sync' (the oldest-due case above raised ten of them): each one's range is counted.
    expect(byQueue(rows).sync).toBeGreaterThan(0);
    // The claim index is read per priority, never the table.
    expect(await reads(DASHBOARD_SQL.scheduledCounts, [['emails', 'thumbnails', 'sync'], SCHEDULED_COUNT_CAP])).not.toContainEqual(expect.stringMatching(/^Seq Scan/));
  });

  it('the check finds a sequential scan where there is one', async () => {
    expect(await seqScans(`SELECT count(*) FROM background_jobs WHERE payload->>'n' = $1`, ['5'])).toEqual(['Seq Scan on background_jobs']);
  });

  it('the table really is large and the searched rows exist (the plans are not of an empty table)', async () => {
    const { rows } = await db.query<{ n: string; keyed: number }>(`SELECT reltuples::int8::text AS n, (SELECT count(*)::int FROM background_jobs WHERE unique_key = 'key-51' AND queue_name = 'emails') AS keyed FROM pg_class WHERE relname = 'background_jobs'`);
    expect(Number(rows[0].n)).toBeGreaterThan(ROWS * 0.9);
    expect(rows[0].keyed).toBe(1);
  });

  /**
   * Issue 23: the side tables the job page and the Instances page read, filled as a busy system fills them: the job
   * page's attempt history (background_job_attempts), the instances registry (background_instances: the Instances
   * page, the overview's "nobody runs this queue", "why", `pg-queue instances`, doctor and the health check) and the
   * rate window "why" reads for a rate-limited queue (background_queue_starts). The app runs each as a named
   * statement, which switches to a generic plan after five runs: both plans are checked (support/plans.ts).
   */
  describe('the side tables of the job and Instances pages', () => {
    const SIDE_TABLES = ['background_jobs', 'background_job_attempts', 'background_instances', 'background_queue_starts'];
    const ATTEMPTS = 100_000;
    const INSTANCES = 300;
    const STARTS = 100_000;

    beforeAll(async () => {
      // Ten attempts for each failed job (ids 100, 200, ... 1,000,000), oldest first: the 10,000 dead letters.
      await db.query(
        `INSERT INTO background_job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error)
         SELECT 100 * (1 + g % 10000), 1 + g / 10000, 'worker-' || g % 7, now() - interval '1 day' + (g || ' ms')::interval,
                now() - interval '1 day' + (g + 50 || ' ms')::interval, 'failed', 'Error: boom ' || g || E'\n    at the stack'
         FROM generate_series(0, $1 - 1) AS g`,
        [ATTEMPTS],
      );
      // Three hundred instances: two thirds live, the rest gone (not yet forgotten by the sweeper).
      await db.query(
        `INSERT INTO background_instances (id, host, pid, queues, started_at, last_seen_at, expires_at)
         SELECT 'instance-' || g, 'host-' || g % 20, 1000 + g,
                jsonb_build_array(jsonb_build_object('queue', (ARRAY['emails', 'thumbnails', 'sync'])[1 + g % 3], 'concurrency', 10, 'running', g % 10)),
                now() - (g || ' minutes')::interval, now() - interval '1 second',
                CASE WHEN g % 3 = 0 THEN now() - interval '10 minutes' ELSE now() + interval '10 seconds' END
         FROM generate_series(1, $1) AS g`,
        [INSTANCES],
      );
      // A thousand rate-limited queues (one per tenant), each with a hundred claims over the last hour.
      await db.query(
        `INSERT INTO background_queue_starts (queue_name, started_at, n)
         SELECT 'rated-' || g % 1000, now() - ((g / 1000) * 36 || ' seconds')::interval, 1 + g % 5
         FROM generate_series(0, $1 - 1) AS g`,
        [STARTS],
      );
      for (const table of ['background_job_attempts', 'background_instances', 'background_queue_starts']) await db.query(`VACUUM ANALYZE ${table}`);
    }, 120_000);

    const indexed: [string, string, string, string, string][] = [
      ['job page: its attempt history', DASHBOARD_SQL.jobAttempts, 'int8', `'${someId}'`, 'background_job_attempts_job_idx'],
      ['job page: why, the rate window of a rate-limited queue', WAIT_SQL.rateWindow, 'text, int8', `'rated-7', 60000`, 'background_queue_starts_idx'],
    ];

    it.each(indexed)('%s: no sequential scan, through its index, in the custom and the generic plan', async (_name, sql, types, args, index) => {
      const modes = await explainBothModes(db, sql, types, args);
      for (const [mode, { all }] of Object.entries(modes)) {
        expect({ mode, seqScans: seqScansOf(all, SIDE_TABLES), index: all.some((n) => n['Index Name'] === index) }).toEqual({ mode, seqScans: [], index: true });
      }
    });

    it('instances: the small registry read once (its own rows, by design) under a Limit of the list cap, never background_jobs, in the custom and the generic plan', async () => {
      // The registry holds a row per process (deleted at a clean stop, forgotten an hour after it expires), and its
      // order (live ones first, by the database clock) comes from no index: reading the small table once and sorting
      // it is the plan. What must not happen: a read of the jobs, or a read of the table per row.
      // Its size around the reads, not pg_class.relpages: that is the last VACUUM's or ANALYZE's count, and the registry's
      // rows are rewritten by every running instance's heartbeat (a stale count once failed this test with a grown
      // table). Its own pages are its heap's and its indexes' (an index scan reads both; the heartbeats' rewrites grow
      // the indexes too), and the larger of the sizes before and after (a VACUUM may truncate empty trailing pages in
      // between): the heap's size alone, read only after, once failed this on a loaded CI machine.
      const size = async () =>
        (await db.query<{ pages: number }>(`SELECT (pg_total_relation_size('background_instances') / current_setting('block_size')::int)::int AS pages`)).rows[0].pages;
      const before = await size();
      const modes = await explainBothModes(db, INSTANCE_SQL.list, 'int8', String(INSTANCE_LIST_CAP));
      const rows = [{ pages: Math.max(before, await size()) }];
      for (const [mode, { all, pages }] of Object.entries(modes)) {
        const reads = all.filter((n) => n['Relation Name'] !== undefined).map((n) => `${n['Node Type']} ${n['Relation Name']}`);
        expect({ mode, top: all[0]['Node Type'], reads, loops: all.filter((n) => n['Relation Name']).map((n) => n['Actual Loops']) }).toEqual({
          mode,
          top: 'Limit',
          reads: [expect.stringMatching(/ background_instances$/)],
          loops: [1],
        });
        expect([mode, seqScansOf(all, ['background_jobs', 'background_job_attempts', 'background_queue_starts'])]).toEqual([mode, []]);
        // The registry's own pages, no more.
        expect([mode, pages <= rows[0].pages + 2]).toEqual([mode, true]);
      }
    });

    it('the side statements return what the tables hold: a job\'s attempts in order, the live instances first, the window\'s starts', async () => {
      const attempts = (await db.query<{ attempt: number; error: string }>({ text: DASHBOARD_SQL.jobAttempts, values: [someId] })).rows;
      expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      const listed = (await db.query<{ id: string; live: boolean }>({ text: INSTANCE_SQL.list, values: [INSTANCE_LIST_CAP] })).rows;
      expect(listed).toHaveLength(INSTANCES);
      expect(listed.findIndex((r) => !r.live)).toBe(listed.filter((r) => r.live).length);
      const window = (await db.query<{ started: number }>({ text: WAIT_SQL.rateWindow, values: ['rated-7', 60_000] })).rows[0];
      const truth = (await db.query<{ n: number }>(`SELECT coalesce(sum(n), 0)::int AS n FROM background_queue_starts WHERE queue_name = 'rated-7' AND started_at > now() - interval '1 minute'`)).rows[0];
      expect(window.started).toBe(truth.n);
      expect(window.started).toBeGreaterThan(0);
    });

    it('the check finds a sequential scan of a side table where there is one', async () => {
      const { force_custom_plan } = await explainBothModes(db, `SELECT count(*) FROM background_job_attempts WHERE error LIKE $1`, 'text', `'%boom 5%'`);
      expect(seqScansOf(force_custom_plan.all, SIDE_TABLES)).toEqual(['Seq Scan on background_job_attempts']);
    });

    it('the side tables are filled as stated (the plans are not of empty tables)', async () => {
      const { rows } = await db.query<{ attempts: number; instances: number; starts: number }>(
        `SELECT (SELECT count(*)::int FROM background_job_attempts) AS attempts, (SELECT count(*)::int FROM background_instances) AS instances,
                (SELECT count(*)::int FROM background_queue_starts) AS starts`,
      );
      expect(rows[0]).toEqual({ attempts: ATTEMPTS, instances: INSTANCES, starts: STARTS });
    });
  });
});
