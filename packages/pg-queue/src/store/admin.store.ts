import { DEFAULT_JOB_LIST_ORDER, type JobListOrder } from './job-list-order.js';
import type { Pool, PoolClient, QueryResultRow } from 'pg';
import type { JobStatus } from '../interfaces/job.interface.js';
import { ADMIN_SQL } from './admin.sql.js';
import { inTransaction } from './in-transaction.js';
import type { JobChange } from './job-store.types.js';

/** Which jobs an admin statement applies to; absent fields match any job. */
export interface JobFilter {
  ids?: string[];
  queue?: string;
  statuses: JobStatus[];
  /** Created more than this many milliseconds ago (database clock). */
  olderThanMs?: number;
  /** The last error contains this text (case-insensitive). */
  errorContains?: string;
  /** Only jobs whose run_at has come ('due') or is still ahead ('scheduled'): the dashboard's split of queued jobs. */
  when?: 'due' | 'scheduled';
}

export interface JobSummary {
  id: string;
  queue: string;
  status: JobStatus;
  attempts: number;
  maxAttempts: number;
  priority: number;
  runAt: Date;
  createdAt: Date;
  finishedAt: Date | null;
  lastError: string | null;
}

/** One batch of a bulk action: rows it looked at (matched and locked), the last id (to go on from), rows changed. */
export interface BatchResult {
  seen: number;
  lastId: string | null;
  changed: number;
  /** A retry's jobs of flows skipped because a parent has not completed or is gone, each with that parent's id. */
  waiting?: { id: string; parent: string }[];
}

export type BulkAction = 'retry' | 'cancel' | 'delete' | 'promote' | 'set-priority' | 'delay';

const BULK_STATEMENT = { retry: 'retryJobs', cancel: 'cancelJobs', delete: 'deleteJobs', promote: 'changeJobs', 'set-priority': 'changeJobs', delay: 'changeJobs' } as const;

/** What a bulk change sets (promote, set-priority, delay); the others take none. */
export type BulkChange = Pick<JobChange, 'priority' | 'promote' | 'runAt' | 'delayMs'>;

/**
 * The command line's table access (listing, bulk actions, doctor's probes), one method per statement of
 * admin.sql.ts. Statements go unnamed: they are rare, their plans depend on which filters are given, and they
 * then also pass through a transaction pooler.
 */
export class AdminStore {
  /** A pool, or one client where the connection matters (doctor's pooler probe). */
  constructor(private readonly pool: Pool | PoolClient) {}

  private async run<R extends QueryResultRow>(name: keyof typeof ADMIN_SQL, values: unknown[] = []): Promise<R[]> {
    return (await this.pool.query<R>({ text: ADMIN_SQL[name], values })).rows;
  }

  /** One page of the jobs matching `filter`, in `order` (job-list-order.ts), after the cursor `afterId` (null: the first page). */
  async listJobs(filter: JobFilter, afterId: string | null, limit: number, order: JobListOrder = DEFAULT_JOB_LIST_ORDER): Promise<JobSummary[]> {
    const rows = await this.run<JobSummaryRow>(order === 'oldest' ? 'listJobsOldest' : 'listJobsNewest', filterValues(filter, afterId, limit));
    return rows.map((r) => ({
      id: r.id,
      queue: r.queue_name,
      status: r.status,
      attempts: r.attempts,
      maxAttempts: r.max_attempts,
      priority: r.priority,
      runAt: r.run_at,
      createdAt: r.created_at,
      finishedAt: r.finished_at,
      lastError: r.last_error,
    }));
  }

  /** Matching jobs among the next `limit` after `afterId`, and the last id counted. */
  async countJobs(filter: JobFilter, afterId: string, limit: number): Promise<{ n: number; lastId: string | null }> {
    const [row] = await this.run<{ n: number; last_id: string | null }>('countJobs', filterValues(filter, afterId, limit));
    return { n: row.n, lastId: row.last_id };
  }

  /**
   * One batch of a retry, cancel, delete or change (promote, set-priority, delay: `change`): up to `limit` matching jobs after `afterId`. Retry and delete reach the
   * jobs partitioned history holds too (README: "Long retention: partitioned history"): a retry brings them back
   * first, in the same transaction (so the mover cannot take them away again before they are queued); a delete
   * deletes there as far as the batch of background_jobs reached.
   */
  async bulkBatch(action: BulkAction, filter: JobFilter, afterId: string, limit: number, change: BulkChange = {}): Promise<BatchResult> {
    const values = filterValues(filter, afterId, limit);
    if (BULK_STATEMENT[action] === 'changeJobs') {
      const set = [change.priority ?? null, change.promote ?? false, change.runAt ?? null, change.delayMs ?? null, false, null];
      return batchResult((await this.run<BatchRow>('changeJobs', [...values, ...set]))[0]);
    }
    if (action === 'retry' && filter.statuses.some((s) => s === 'failed' || s === 'cancelled')) {
      return this.inTransaction(async (client) => {
        await client.query({ text: ADMIN_SQL.bringBackJobs, values });
        return batchResult((await client.query<BatchRow>({ text: ADMIN_SQL.retryJobs, values })).rows[0]);
      });
    }
    const batch = batchResult((await this.run<BatchRow>(BULK_STATEMENT[action], values))[0]);
    if (action !== 'delete') return batch;
    const full = batch.seen >= limit;
    const [history] = await this.run<{ changed: number; last_id: string | null }>('deleteHistoryJobs', [...values, full ? batch.lastId : null]);
    const historyFull = !full && history.changed >= limit;
    return {
      seen: batch.seen + history.changed,
      // Both batches end at the same id when the first is full; else background_jobs has no match left past its last.
      lastId: full ? batch.lastId : historyFull ? history.last_id : maxId(batch.lastId, history.last_id),
      changed: batch.changed + history.changed,
    };
  }

  /**
   * `work` in one transaction: on a pool, one of its own (store/in-transaction.ts); on a client, the transaction the
   * caller holds it in (the dashboard's request), which a BEGIN and COMMIT here would end early.
   */
  private inTransaction<T>(work: (client: Pool | PoolClient) => Promise<T>): Promise<T> {
    return 'release' in this.pool ? work(this.pool) : inTransaction(this.pool, work);
  }

  async queueIndexes(): Promise<{ name: string; valid: boolean }[]> {
    return this.run('queueIndexes');
  }

  /** background_jobs' storage parameters ("name=value"), or null when the table does not exist. */
  async jobsTableOptions(): Promise<string[] | null> {
    const [row] = await this.run<{ options: string[] | null }>('jobsTableOptions');
    return row ? (row.options ?? []) : null;
  }

  /** In-flight jobs whose lease ended more than `graceMs` ago (up to `limit`); `buffered`: how many of them never started. */
  async stuckLeases(graceMs: number, limit: number): Promise<{ n: number; buffered: number; oldest: Date | null }> {
    const [row] = await this.run<{ n: number; buffered: number; oldest: Date | null }>('stuckLeases', [graceMs, limit]);
    return row;
  }

  /** How many rows a prune pass would delete, each kind counted up to `limit`; failedRetentionMs null: none. */
  async countPrunable(completedRetentionMs: number, failedRetentionMs: number | null, limit: number): Promise<{ completed: number; failed: number }> {
    const [row] = await this.run<{ completed: number; failed: number }>('countPrunable', [completedRetentionMs, failedRetentionMs, limit]);
    return row;
  }

  /**
   * Adds one job through the SQL function pg_queue_enqueue (pg_queue_enqueue_unique when it has unique options), which
   * checks it: a refused job fails with SQLSTATE 22023 and a message naming the option, and nothing is stored.
   */
  async enqueue(job: SqlEnqueueJob): Promise<{ id: string; duplicate: boolean; replaced: boolean }> {
    const values: unknown[] = [job.queue, job.payloadJson, job.runAt ?? null, job.delayMs ?? null, job.priority ?? null, job.maxAttempts ?? null, job.concurrencyKey ?? null, job.lifo ?? null];
    if (job.uniqueKey === undefined && job.onConflict === undefined && job.uniqueForMs === undefined) {
      const [row] = await this.run<{ id: string }>('enqueueJob', values);
      return { id: row.id, duplicate: false, replaced: false };
    }
    const [row] = await this.run<{ id: string; duplicate: boolean; replaced: boolean }>('enqueueUniqueJob', [...values, job.uniqueKey ?? null, job.onConflict ?? null, job.uniqueForMs ?? null]);
    return row;
  }

  async existingIds(ids: string[]): Promise<Set<string>> {
    return new Set((await this.run<{ id: string }>('existingIds', [ids])).map((r) => r.id));
  }

  async backendPid(): Promise<number> {
    const [row] = await this.run<{ pid: number }>('backendPid');
    return row.pid;
  }
}

/** One job for the SQL enqueue functions: the payload as JSON text, the options as QueueService.enqueue names them. */
export interface SqlEnqueueJob {
  queue: string;
  payloadJson: string;
  runAt?: Date;
  delayMs?: number;
  priority?: number;
  maxAttempts?: number;
  concurrencyKey?: string;
  uniqueKey?: string;
  onConflict?: string;
  uniqueForMs?: number;
  /** Last in, first out (EnqueueOptions.lifo). */
  lifo?: boolean;
}

/** A job as the CLI's lists and the dashboard's show it. */
export interface JobSummaryRow {
  id: string;
  queue_name: string;
  status: JobStatus;
  attempts: number;
  max_attempts: number;
  priority: number;
  run_at: Date;
  created_at: Date;
  finished_at: Date | null;
  last_error: string | null;
}

/** The parameters of JOB_FILTER (admin.sql.ts) and of the statement's row limit ($7). */
interface BatchRow {
  seen: number;
  last_id: string | null;
  changed: number;
  waiting?: { id: string; parent: string }[];
}

function batchResult(row: BatchRow): BatchResult {
  return { seen: row.seen, lastId: row.last_id, changed: row.changed, ...(row.waiting?.length ? { waiting: row.waiting } : {}) };
}

function maxId(a: string | null, b: string | null): string | null {
  if (a === null) return b;
  if (b === null) return a;
  return BigInt(a) >= BigInt(b) ? a : b;
}

export function filterValues(f: JobFilter, afterId: string | null, limit: number): unknown[] {
  return [afterId, f.ids ?? null, f.queue ?? null, f.statuses, f.olderThanMs ?? null, f.errorContains ?? null, limit, f.when ?? null];
}
