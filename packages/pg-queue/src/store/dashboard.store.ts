import type { JobListOrder } from './job-list-order.js';
import type { Pool, PoolClient, QueryResultRow } from 'pg';
import type { FlowStatus, OnParentFailure } from '../flows/flow.interfaces.js';
import type { JobStatus, QueueStats } from '../interfaces/job.interface.js';
import { AdminStore, type BatchResult, type BulkAction, type JobFilter, type JobSummaryRow } from './admin.store.js';
import { DASHBOARD_SQL } from './dashboard.sql.js';
import { DashboardEventQueries } from './dashboard-events.store.js';
import { DashboardFairnessQueries } from './dashboard-fairness.store.js';
import { FlowStore } from './flow.store.js';
import { inTransaction } from './in-transaction.js';
import { JobStore } from './job.store.js';
import { STATS_EXACT_LIMIT } from './job-read.store.js';
import type { InstanceRecord } from './instance.store.js';
import { explainWait } from '../waiting/explain-wait.js';
import type { WaitExplanation } from '../waiting/wait-reasons.js';

/** A row of the dashboard's jobs list. */
export interface JobListRow extends JobSummaryRow {
  /** When the job was last claimed: a running job's start, a finished one's last attempt's start. */
  locked_at: Date | null;
  /** The database's clock at the read (relative times and durations are reckoned from it). */
  now: Date;
  unique_key: string | null;
  /** The start of the payload as JSON text; null when payloads are hidden. */
  payload_preview: string | null;
}

/** One page of the jobs list and where the next one starts (null: no older ids left to scan). */
export interface JobListPage {
  rows: JobListRow[];
  /** Newest first: the next (older) page's `before`; null: the end (or oldest first). */
  nextBefore: string | null;
  /** Oldest first: the next (newer) page's `after`; null: the end (or newest first). */
  nextAfter: string | null;
  /** The ids this page looked at: [from, below). */
  scanned: { from: string; below: string };
  /** A text search ran out of its time (the statement timeout) before it filled the page or reached the first id. */
  stoppedEarly: boolean;
}

export interface JobListQuery {
  queue: string | null;
  status: JobStatus | null;
  /** Ids below this one (null: from the newest). */
  before: string | null;
  /** The list's order (job-list-order.ts; default newest first). Oldest first pages with `after`, never searches text. */
  order?: JobListOrder;
  /** Oldest first: ids above this one (null: from the oldest). */
  after?: string | null;
  limit: number;
  withPayload: boolean;
  /** Queued jobs only whose run_at has come ('due') or is still ahead ('scheduled'); null: both. */
  when?: 'due' | 'scheduled' | null;
  /** Text the payload (as JSON) or the last error contains, case-insensitively; null: no search. */
  text?: string | null;
}

/** Final outcomes per queue, status and minute of the last hour (0 = the current minute). */
export interface FinishedMinute {
  queue_name: string;
  status: 'completed' | 'failed';
  minutes_ago: number;
  n: number;
}

interface FinishedMinuteRow {
  queue_name: string;
  status: 'completed' | 'failed';
  minute: Date;
  now: Date;
  n: number;
}

/** A row of the flows list. */
export interface FlowListRow {
  id: string;
  name: string | null;
  status: FlowStatus;
  reason: string | null;
  created_at: Date;
  finished_at: Date | null;
  /** Counted up to FLOW_JOB_COUNT_CAP + 1: more than the cap reads as "over FLOW_JOB_COUNT_CAP". */
  jobs: number;
}

export interface FlowListPage {
  rows: FlowListRow[];
  nextBefore: string | null;
  scanned: { from: string; below: string };
}

/** A flow's row and its jobs by status (from at most FLOW_JOB_COUNT_CAP + 1 of them: `capped` says the counts are a floor). */
export interface FlowHeader {
  id: string;
  name: string | null;
  status: FlowStatus;
  reason: string | null;
  failed_job_id: string | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  counts: Partial<Record<JobStatus, number>>;
  capped: boolean;
}

/** A job of a flow as its page draws and lists it. */
export interface FlowJobRow {
  id: string;
  ref: string | null;
  queue_name: string;
  status: JobStatus;
  attempts: number;
  max_attempts: number;
  /** A compensation job: the id of the job it undoes. */
  compensates: string | null;
  run_at: Date;
  finished_at: Date | null;
  last_error: string | null;
  /** A blocked job: the refs of the first parents it still waits for (null otherwise). */
  waiting_for: string[] | null;
  /** A blocked job: how many parents it still waits for, counted up to WAITING_COUNT_CAP. */
  waiting: number | null;
}

export interface FlowEdgeRow {
  parent: string;
  child: string;
  on_failure: OnParentFailure;
  done: boolean;
}

/** The flow of a job, for the job's page. */
/** One recorded attempt of a job (background_job_attempts), as the job page shows it. */
export interface AttemptHistoryRow {
  attempt: number;
  worker: string | null;
  started_at: Date | null;
  finished_at: Date;
  outcome: string;
  error: string | null;
  duration_ms: number | null;
}

export interface JobFlowRow {
  id: string;
  name: string | null;
  status: FlowStatus;
  ref: string | null;
  waiting_for: string[] | null;
  waiting: number | null;
}

/** A dashboard action: the admin store's retry, cancel and delete, plus moving queued jobs' run_at to now (promote). */
export type DashboardAction = Exclude<BulkAction, 'promote' | 'set-priority' | 'delay'> | 'run-now';

/** How many ids one page of the jobs list reads at most before it stops and offers to go on. */
export const LIST_SCAN_WINDOW = 100_000;
/** A text search reads ids in chunks of this many, each its own statement, until its time is up. */
export const SEARCH_CHUNK = 10_000;
/** Scheduled jobs (queued, run_at ahead) are counted exactly up to this many per queue and priority. */
export const SCHEDULED_COUNT_CAP = 10_000;
/** A flow's jobs are counted (in the flows list, and by status on its page) up to this many. */
export const FLOW_JOB_COUNT_CAP = 10_000;
/** A blocked job lists this many of the refs it waits for (and counts the rest). */
export const WAITING_REFS_SHOWN = 10;
/** The throughput chart reads at most this many finished rows per status (newest first). */
export const CHART_ROW_CAP = 50_000;
/**
 * The dashboard's counts are exact up to this many jobs per queue and status, estimated above: the bound of
 * QueueService.stats() and `pg-queue stats`, so that the dashboard and the command line show the same numbers.
 */
export const DASHBOARD_EXACT_LIMIT = STATS_EXACT_LIMIT;

/** One bucket of a queue's finished jobs: counts, and percentiles in ms of their last attempt's wait and run (null: none). */
export interface TimeBucket {
  completed: number;
  failed: number;
  waitP50: number | null;
  waitP95: number | null;
  runP50: number | null;
  runP95: number | null;
}

/** A queue's last hour (12 buckets of 5 minutes) and day (24 of an hour), oldest first; `capped`: a row cap was reached. */
export interface QueueTimes {
  hour: TimeBucket[];
  day: TimeBucket[];
  capped: boolean;
}

interface QueueTimeRow {
  span: 'hour' | 'day';
  ago: number;
  completed: number;
  failed: number;
  wait_p50: number | null;
  wait_p95: number | null;
  run_p50: number | null;
  run_p95: number | null;
  read_completed: number;
  read_failed: number;
}

/**
 * The statements one dashboard request runs, on one connection inside one transaction whose statement
 * timeout bounds each of them. Counts reuse JobStore.countByStatus (exact up to a cap, estimated above it)
 * and actions reuse the command line's AdminStore batches, on this connection.
 */
export class DashboardQueries {
  // JobStore and AdminStore only call query(); unnamed statements (transactionPooler) are planned per call.
  private readonly jobs: JobStore;
  private readonly admin: AdminStore;
  private readonly flows: FlowStore;
  /** The event stream's table and the fair share settings, on this request's connection. */
  readonly events: DashboardEventQueries;
  readonly fairness: DashboardFairnessQueries;

  /** `timeoutMs`: the request's statement timeout, which a text search also spends as its whole budget. */
  constructor(
    private readonly client: PoolClient,
    private readonly timeoutMs: number,
  ) {
    this.jobs = new JobStore(client as unknown as Pool, { transactionPooler: true });
    this.admin = new AdminStore(client);
    this.flows = new FlowStore(client as unknown as Pool, { transactionPooler: true });
    this.events = new DashboardEventQueries(client);
    this.fairness = new DashboardFairnessQueries(client);
  }

  private async run<R extends QueryResultRow>(name: keyof typeof DASHBOARD_SQL, values: unknown[] = []): Promise<R[]> {
    return (await this.client.query<R>({ text: DASHBOARD_SQL[name], values })).rows;
  }

  countByStatus(): Promise<QueueStats> {
    return this.jobs.countByStatus(DASHBOARD_EXACT_LIMIT);
  }

  /** The instances registry (live ones first). */
  instances(): Promise<InstanceRecord[]> {
    return this.jobs.instances.list();
  }

  /** Why a job is not running (QueueService.whyNotRunning), on this request's connection and under its timeout. */
  whyNotRunning(id: string): Promise<WaitExplanation | null> {
    return explainWait(this.jobs.waits, this.jobs.instances, id);
  }

  async pausedQueues(): Promise<string[]> {
    return (await this.run<{ queue_name: string }>('pausedQueues')).map((r) => r.queue_name);
  }

  /** Per queue: ms its oldest due job has waited, or null when none is due. */
  async oldestDue(queues: string[]): Promise<Map<string, number | null>> {
    const rows = await this.run<{ queue_name: string; age_ms: string | null }>('oldestDue', [queues]);
    return new Map(rows.map((r) => [r.queue_name, r.age_ms === null ? null : Number(r.age_ms)]));
  }

  async finishedPerMinute(): Promise<{ minutes: FinishedMinute[]; capped: boolean }> {
    const rows = await this.run<FinishedMinuteRow>('finishedPerMinute', [CHART_ROW_CAP]);
    const minutes = rows.map((r) => ({
      queue_name: r.queue_name,
      status: r.status,
      minutes_ago: Math.floor(r.now.getTime() / 60_000) - Math.floor(r.minute.getTime() / 60_000),
      n: r.n,
    }));
    const perStatus = new Map<string, number>();
    for (const m of minutes) perStatus.set(m.status, (perStatus.get(m.status) ?? 0) + m.n);
    return { minutes, capped: [...perStatus.values()].some((n) => n >= CHART_ROW_CAP) };
  }

  /** A queue's finished jobs of the last hour and day, in buckets, with wait and run percentiles (DASHBOARD_SQL.queueTimes). */
  async queueTimes(queue: string): Promise<QueueTimes> {
    const rows = await this.run<QueueTimeRow>('queueTimes', [queue, CHART_ROW_CAP]);
    const empty = (n: number): TimeBucket[] => Array.from({ length: n }, () => ({ completed: 0, failed: 0, waitP50: null, waitP95: null, runP50: null, runP95: null }));
    const hour = empty(12);
    const day = empty(24);
    for (const r of rows) {
      const buckets = r.span === 'hour' ? hour : day;
      if (r.ago < 0 || r.ago >= buckets.length) continue;
      // Oldest first: bucket 0 is the earliest.
      buckets[buckets.length - 1 - r.ago] = { completed: r.completed, failed: r.failed, waitP50: r.wait_p50, waitP95: r.wait_p95, runP50: r.run_p50, runP95: r.run_p95 };
    }
    const capped = rows.some((r) => r.read_completed >= CHART_ROW_CAP || r.read_failed >= CHART_ROW_CAP);
    return { hour, day, capped };
  }

  async listJobs(q: JobListQuery): Promise<JobListPage> {
    if (q.order === 'oldest') return this.listOldest(q);
    const below = BigInt(q.before ?? BigInt((await this.run<{ id: string }>('maxId'))[0].id) + 1n);
    if (q.text) return this.searchJobs(q, below);
    const from = below > BigInt(LIST_SCAN_WINDOW) ? below - BigInt(LIST_SCAN_WINDOW) : 1n;
    const rows = await this.listRange(q, below, from, q.limit);
    const full = rows.length === q.limit;
    const nextBefore = full ? rows[rows.length - 1].id : from > 1n ? String(from) : null;
    return { rows, nextBefore, nextAfter: null, scanned: { from: String(from), below: String(below) }, stoppedEarly: false };
  }

  /** Oldest first: the window of LIST_SCAN_WINDOW ids above `after`, read upwards; Newer goes on from its end. */
  private async listOldest(q: JobListQuery): Promise<JobListPage> {
    const from = BigInt(q.after ?? '0') + 1n;
    const below = from + BigInt(LIST_SCAN_WINDOW);
    const rows = await this.run<JobListRow>('listJobsOldest', [String(below), String(from), q.queue, q.status, q.limit, q.withPayload, q.when ?? null, null]);
    const newest = BigInt((await this.run<{ id: string }>('maxId'))[0].id);
    const nextAfter = rows.length === q.limit ? rows[rows.length - 1].id : below <= newest ? String(below - 1n) : null;
    return { rows, nextBefore: null, nextAfter, scanned: { from: String(from), below: String(below) }, stoppedEarly: false };
  }

  private listRange(q: JobListQuery, below: bigint, from: bigint, limit: number): Promise<JobListRow[]> {
    return this.run<JobListRow>('listJobs', [String(below), String(from), q.queue, q.status, limit, q.withPayload, q.when ?? null, q.text ?? null]);
  }

  /**
   * A search of payloads and errors reads every row of the ids it covers, so it goes down from `below` a chunk of
   * SEARCH_CHUNK ids at a time, and spends at most the request's statement timeout in all: each chunk runs in a
   * savepoint with the time left as its own timeout, and one cut off ends the search there ("stopped early"), with
   * the rows found so far and Older going on below the last whole chunk.
   */
  private async searchJobs(q: JobListQuery, below: bigint): Promise<JobListPage> {
    const deadline = Date.now() + this.timeoutMs;
    const rows: JobListRow[] = [];
    let top = below;
    let stoppedEarly = false;
    while (top > 1n && rows.length < q.limit) {
      const left = deadline - Date.now();
      if (left < 1) {
        stoppedEarly = true;
        break;
      }
      const from = top > BigInt(SEARCH_CHUNK) ? top - BigInt(SEARCH_CHUNK) : 1n;
      await this.client.query(`SAVEPOINT search_chunk; SET LOCAL statement_timeout = ${Math.ceil(left)}`);
      try {
        rows.push(...(await this.listRange(q, top, from, q.limit - rows.length)));
        await this.client.query('RELEASE SAVEPOINT search_chunk');
      } catch (error) {
        if ((error as { code?: string }).code !== '57014') throw error;
        // ROLLBACK TO undoes the chunk's SET LOCAL too: the request's own timeout holds again.
        await this.client.query('ROLLBACK TO SAVEPOINT search_chunk');
        stoppedEarly = true;
        break;
      }
      top = from;
    }
    const full = rows.length === q.limit;
    const nextBefore = full ? rows[rows.length - 1].id : top > 1n ? String(top) : null;
    return { rows, nextBefore, nextAfter: null, scanned: { from: String(full ? BigInt(rows[rows.length - 1].id) : top), below: String(below) }, stoppedEarly };
  }

  /** Per queue: how many of its queued jobs wait for a later run_at, exact up to SCHEDULED_COUNT_CAP. */
  async scheduledCounts(queues: string[]): Promise<Map<string, number>> {
    if (queues.length === 0) return new Map();
    const rows = await this.run<{ queue_name: string; n: number }>('scheduledCounts', [queues, SCHEDULED_COUNT_CAP]);
    return new Map(rows.map((r) => [r.queue_name, r.n]));
  }

  findByUniqueKey(key: string, queue: string | null, withPayload: boolean): Promise<JobListRow[]> {
    return this.run<JobListRow>('findByUniqueKey', [key, queue, withPayload]);
  }

  /** The job's row as JSON (every column, those of later migrations too) and the database's now(). */
  /** A job's recorded attempts, oldest first; [] before the AttemptHistory migration. */
  async jobAttempts(id: string): Promise<AttemptHistoryRow[]> {
    try {
      return await this.run<AttemptHistoryRow>('jobAttempts', [id]);
    } catch (error) {
      if ((error as { code?: string }).code === '42P01') return [];
      throw error;
    }
  }

  async jobDetail(id: string): Promise<{ row: Record<string, unknown>; now: Date } | null> {
    const [found] = await this.run<{ row: Record<string, unknown>; now: Date }>('jobDetail', [id]);
    return found ?? null;
  }

  /** One page of flows, newest first, as listJobs pages jobs: a window of ids below `before`, `status` when given. */
  async listFlows(status: FlowStatus | null, before: string | null, limit: number): Promise<FlowListPage> {
    const below = BigInt(before ?? BigInt((await this.run<{ id: string }>('maxFlowId'))[0].id) + 1n);
    const from = below > BigInt(LIST_SCAN_WINDOW) ? below - BigInt(LIST_SCAN_WINDOW) : 1n;
    const rows = await this.run<FlowListRow>('listFlows', [String(below), String(from), status, limit, FLOW_JOB_COUNT_CAP]);
    const full = rows.length === limit;
    const nextBefore = full ? rows[rows.length - 1].id : from > 1n ? String(from) : null;
    return { rows, nextBefore, scanned: { from: String(from), below: String(below) } };
  }

  async flowHeader(id: string): Promise<FlowHeader | null> {
    const [row] = await this.run<Omit<FlowHeader, 'capped'>>('flowHeader', [id, FLOW_JOB_COUNT_CAP + 1]);
    if (!row) return null;
    const counted = Object.values(row.counts).reduce((sum, n) => sum + (n ?? 0), 0);
    return { ...row, capped: counted > FLOW_JOB_COUNT_CAP };
  }

  /** Up to `limit` jobs of the flow by id, after id `after` ('0': from the first). */
  flowJobs(flowId: string, after: string, limit: number): Promise<FlowJobRow[]> {
    return this.run<FlowJobRow>('flowJobs', [flowId, after, limit, WAITING_REFS_SHOWN]);
  }

  /** The edges between the given jobs, at most `limit`. */
  flowEdges(jobIds: string[], limit: number): Promise<FlowEdgeRow[]> {
    return this.run<FlowEdgeRow>('flowEdges', [jobIds, limit]);
  }

  async jobFlow(flowId: string, jobId: string): Promise<JobFlowRow | null> {
    const [row] = await this.run<JobFlowRow>('jobFlow', [flowId, jobId, WAITING_REFS_SHOWN]);
    return row ?? null;
  }

  /** FlowStore.cancelFlow on this connection: null when there is no such flow or it had finished. */
  cancelFlow(id: string): Promise<{ cancelled: number; signalled: number } | null> {
    return this.flows.cancelFlow(id);
  }

  /** One batch of an action on up to `limit` jobs matching `filter` after id `afterId`. */
  async actionBatch(action: DashboardAction, filter: JobFilter, afterId: string, limit: number): Promise<BatchResult> {
    return action === 'run-now' ? this.admin.bulkBatch('promote', filter, afterId, limit, { promote: true }) : this.admin.bulkBatch(action, filter, afterId, limit);
  }
}

/**
 * The dashboard's table access: each request's statements on one connection of the dashboard's own small
 * pool (a page never takes a connection the workers need), in one transaction whose SET LOCAL
 * statement_timeout bounds every statement (works through a transaction pooler, unlike a startup parameter).
 */
export class DashboardStore {
  constructor(
    private readonly pool: Pool,
    private readonly statementTimeoutMs: number,
  ) {
    if (!Number.isInteger(statementTimeoutMs) || statementTimeoutMs < 1) throw new RangeError(`statementTimeoutMs must be a positive integer, got ${statementTimeoutMs}`);
  }

  /** Reads in a READ ONLY transaction. */
  read<T>(work: (q: DashboardQueries) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, (client) => work(new DashboardQueries(client, this.statementTimeoutMs)), `BEGIN READ ONLY; SET LOCAL statement_timeout = ${this.statementTimeoutMs}`);
  }

  /** One action batch, committed on its own: its row locks last one batch. */
  write<T>(work: (q: DashboardQueries) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, (client) => work(new DashboardQueries(client, this.statementTimeoutMs)), `BEGIN; SET LOCAL statement_timeout = ${this.statementTimeoutMs}`);
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}
