import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import type { INestApplicationContext } from '@nestjs/common';
import { createTestDatabase } from '@internal/pg-harness';
import { SQL } from '../src/store/job.sql.js';
import { STEP_SQL } from '../src/store/step.sql.js';
import { explainBothModes, nodes, type PlanNode } from './support/plans.js';
import { sqlPool, startApp } from './support/test-app.js';

const WORKER = 'settle-plans-worker';
const BATCH = 300;
/** Jobs the worker claims and settles first: each leaves a dead entry in background_jobs_in_flight_idx until vacuum. */
const HISTORY = 12_000;

/**
 * The statements that settle or renew "these ids, held by this worker" (a batch of up to 1,000). Their cost must
 * follow the batch, not the worker's history. Found by the benchmark on PostgreSQL 15: the planner read
 * `locked_by = $1` off the in-flight index (locked_by, id) WHERE status = 'processing' without the id key, as the
 * statistics, taken before the worker existed, promised a handful of its rows; that scan returns one dead entry
 * for every job the worker settled since the last vacuum. Completions of a 300k-job cell grew from 8 to 24 ms,
 * and processing fell from 30k to 12k jobs/s within the cell.
 */
/** One job's unwritten lines, as the worker sends them (LogEntry). */
const LOGGED = { m: 100, l: [[1, 0, 'a line']] };

const SETTLES: Array<{ name: keyof typeof SQL; values: (ids: string[], tokens: Record<string, string>) => unknown[] }> = [
  { name: 'completeJobs', values: (ids) => [WORKER, ids, null, '1'] },
  { name: 'completeJobsWithResults', values: (ids, t) => [WORKER, ids, JSON.stringify(t), null, JSON.stringify({ [ids[0]]: { r: 1 } })] },
  { name: 'completeJobsKeyless', values: (ids) => [WORKER, ids, null, '1'] },
  { name: 'completeJobsWithResultsKeyless', values: (ids, t) => [WORKER, ids, JSON.stringify(t), null, JSON.stringify({ [ids[0]]: { r: 1 } })] },
  { name: 'deleteCompletedJobs', values: (ids) => [WORKER, ids, null, '1'] },
  { name: 'deleteCompletedJobsWithResults', values: (ids, t) => [WORKER, ids, JSON.stringify(t), null, JSON.stringify({ [ids[0]]: { r: 1, l: LOGGED } })] },
  { name: 'failJobs', values: (ids, t) => [WORKER, ids, JSON.stringify(Object.fromEntries(ids.map((id) => [id, { token: t[id], error: 'e', delayMs: 0 }])))] },
  { name: 'snoozeJobs', values: (ids, t) => [WORKER, ids, JSON.stringify(Object.fromEntries(ids.map((id) => [id, { token: t[id], delayMs: 0 }])))] },
  { name: 'heartbeat', values: (ids, t) => [WORKER, 30_000, ids, JSON.stringify(t), null, [], '{}'] },
  { name: 'releaseJobs', values: (ids, t) => [WORKER, ids, JSON.stringify(t)] },
  // The start mark: one probe of the queue's row per job it finds buffered (MUST_NOT_START), none of background_jobs.
  { name: 'markStarted', values: (ids, t) => [WORKER, 30_000, ids, JSON.stringify(t)] },
  // The variants that carry lines a handler logged (job.log()): the same reads, each job's lines looked up by its id.
  { name: 'completeJobsWithLogs', values: (ids, t) => [WORKER, ids, JSON.stringify(t), null, JSON.stringify({ [ids[0]]: { l: LOGGED } })] },
  { name: 'failJobsWithLogs', values: (ids, t) => [WORKER, ids, JSON.stringify(Object.fromEntries(ids.map((id) => [id, { token: t[id], error: 'e', delayMs: 0, logs: LOGGED }])))] },
  { name: 'snoozeJobsWithLogs', values: (ids, t) => [WORKER, ids, JSON.stringify(Object.fromEntries(ids.map((id) => [id, { token: t[id], delayMs: 0, logs: LOGGED }])))] },
  { name: 'heartbeatWithLogs', values: (ids, t) => [WORKER, 30_000, ids, JSON.stringify(t), null, [], '{}', JSON.stringify({ [ids[0]]: LOGGED })] },
  { name: 'releaseJobsWithLogs', values: (ids, t) => [WORKER, ids, JSON.stringify(t), JSON.stringify({ [ids[0]]: LOGGED })] },
];
/**
 * One job's write (a durable step's record, job.step()): its id is a key of whichever index it probes. A named
 * statement, so checked prepared, with a custom and a generic plan (explainBothModes).
 */
const SINGLE: Array<{ name: string; text: string; types: string; args: (id: string, token: string) => string }> = [
  { name: 'recordStep', text: STEP_SQL.recordStep, types: 'int8, text, int8, jsonb, int8', args: (id, token) => `${id}, '${WORKER}', ${token}, '{"name": "s", "result": 1}', NULL` },
];

interface TableRead {
  index: string;
  cond: string | undefined;
  rows: number;
}

/** The index and sequential scans of background_jobs among a plan's nodes, with the rows each returned. */
function tableReads(all: PlanNode[]): TableRead[] {
  return all
    .filter((n) => n['Index Name']?.startsWith('background_jobs_') || (n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'background_jobs'))
    .map((n) => ({ index: n['Index Name'] ?? 'Seq Scan', cond: n['Index Cond'], rows: (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1) }));
}

describe('settle plans: a batch reads its own rows, not the worker history', () => {
  let app: INestApplicationContext;
  let db: pg.Pool;
  let held: { ids: string[]; tokens: Record<string, string> };

  async function claim(n: number): Promise<{ ids: string[]; tokens: Record<string, string> }> {
    const { rows } = await db.query<{ id: string | null; fence_token: string }>(SQL.claimJobs, ['q', n, WORKER, 30_000, n, 5_000, 0, null]);
    const claimed = rows.filter((r) => r.id !== null);
    return { ids: claimed.map((r) => r.id!), tokens: Object.fromEntries(claimed.map((r) => [r.id!, r.fence_token])) };
  }

  beforeAll(async () => {
    const url = await createTestDatabase('settleplans');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    // No vacuum behind the test's back: the dead entries are what a busy table holds between two autovacuums.
    await db.query('ALTER TABLE background_jobs SET (autovacuum_enabled = false)');
    await app.get(QueueService).enqueueMany(Array.from({ length: HISTORY + BATCH }, (_, i) => ({ queue: 'q', payload: { i } })));
    // Statistics from before the worker ran anything, as a table analyzed before a deploy has.
    await db.query('ANALYZE background_jobs');
    for (let done = 0; done < HISTORY; done += 1_000) {
      const { ids } = await claim(1_000);
      await db.query(SQL.completeJobs, [WORKER, ids, null, '1']);
    }
    held = await claim(BATCH);
    expect(held.ids).toHaveLength(BATCH);
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  /**
   * A batch statement's reads of the jobs table, from EXPLAIN ANALYZE in a transaction rolled back. These statements
   * are sent unnamed (PLANNED_PER_CALL), so each call is planned with its real arrays, as here.
   */
  async function reads(text: string, values: unknown[]): Promise<TableRead[]> {
    const client = await db.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values);
      await client.query('ROLLBACK');
      return tableReads(nodes(rows[0]['QUERY PLAN'][0].Plan as PlanNode));
    } finally {
      client.release();
    }
  }

  it.each(SETTLES)('$name probes the batch by id, not the worker history (EXPLAIN ANALYZE, rolled back)', async (settle) => {
    const read = await reads(SQL[settle.name], settle.values(held.ids, held.tokens));
    // Every read of the jobs table is keyed by the batch's ids (the primary key here; before HELD_BY_WORKER,
    // PostgreSQL 18 probed the in-flight index with both its keys, 15 by locked_by alone), never a scan by worker or status alone.
    expect(read.length).toBeGreaterThan(0);
    for (const r of read) expect(r).toEqual({ index: r.index, cond: expect.stringMatching(/\bid = ANY \(/), rows: r.rows });
    // Each probe returns at most the batch (with the worker's history in the scan: 12,300 entries here).
    expect(read.filter((r) => r.rows > BATCH)).toEqual([]);
  });

  it.each(SINGLE)('$name probes its job by id, with a custom and a generic plan', async (single) => {
    const plans = await explainBothModes(db, single.text, single.types, single.args(held.ids[0], held.tokens[held.ids[0]]));
    for (const [mode, { all }] of Object.entries(plans)) {
      const read = tableReads(all);
      expect([mode, read.length > 0]).toEqual([mode, true]);
      for (const r of read) expect([mode, r]).toEqual([mode, { index: r.index, cond: expect.stringMatching(/\bid = /), rows: 1 }]);
    }
  });
});
