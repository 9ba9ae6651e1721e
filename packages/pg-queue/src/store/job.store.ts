import type { Pool, PoolClient, QueryResultRow } from 'pg';
import type { EntityManager } from 'typeorm';
import type { JobRecord, JobStatus, QueueStats } from '../interfaces/job.interface.js';
import { PLANNED_PER_CALL, SQL } from './job.sql.js';

/** A job as claimed: what the worker needs to run one attempt. */
export interface ClaimedJob {
  id: string;
  payload: unknown;
  attempt: number;
  maxAttempts: number;
  priority: number;
  /** Epoch milliseconds; the Job turns them into Dates only if a handler asks. */
  runAtMs: number;
  createdAtMs: number;
}

export interface ClaimResult {
  jobs: ClaimedJob[];
  /** When the claim came back short: ms until the queue's next delayed job, or null if none is waiting. */
  nextDueMs: number | null;
}

export interface NewJobRow {
  queue: string;
  payloadJson: string;
  priority: number;
  maxAttempts: number;
  runAt: Date | null;
  delayMs: number;
}

export interface FailedAttempt {
  id: string;
  attempt: number;
  error: string;
  retryDelayMs: number;
}

export interface JobRef {
  id: string;
  attempt: number;
}

export type CancelResult = 'cancelled' | 'not-found' | JobStatus;

/**
 * The queue's table access, one method per statement (Table+Verb, as River names them). Callers never
 * write SQL. The hot path goes straight to the pg Pool underneath TypeORM, mostly with named (prepared) statements;
 * enqueue inside a caller's transaction goes through that transaction's EntityManager.
 */
export class JobStore {
  constructor(private readonly pool: Pool) {}

  private async run<R extends QueryResultRow>(name: keyof typeof SQL, values: unknown[]): Promise<R[]> {
    const query = PLANNED_PER_CALL.has(name) ? { text: SQL[name], values } : { name: `pgq_${name}`, text: SQL[name], values };
    const result = await this.pool.query<R>(query);
    return result.rows;
  }

  async insertJob(row: NewJobRow, manager?: EntityManager): Promise<string> {
    const values = [row.queue, row.payloadJson, row.priority, row.maxAttempts, row.runAt, row.delayMs];
    const rows = manager ? await managerQuery(manager, SQL.insertJob, values) : await this.run<{ id: string }>('insertJob', values);
    return rows[0].id;
  }

  /**
   * One statement when the payloads fit in one jsonb array; else one statement per chunk inside one
   * transaction (the caller's, through a savepoint, or one of its own), so the call stays all-or-nothing.
   */
  async insertJobs(rows: NewJobRow[], manager?: EntityManager): Promise<string[]> {
    const chunks = chunkByPayloadSize(rows, INSERT_CHUNK_CHARS);
    if (chunks.length === 1) {
      const { statement, values } = insertJobsStatement(rows);
      const result = manager ? await managerQuery(manager, SQL[statement], values) : await this.run<{ id: string }>(statement, values);
      return result.map((r) => r.id);
    }
    if (manager) return manager.transaction((m) => insertChunks(chunks, (text, values) => managerQuery(m, text, values)));
    // Unnamed statements: planning is nothing next to 16 MB of payload, and this rare call pins no prepared statement.
    return this.inOwnTransaction((client) => insertChunks(chunks, async (text, values) => (await client.query<{ id: string }>({ text, values })).rows));
  }

  /** Runs `work` in a transaction on one pooled connection; a connection whose rollback failed is discarded. */
  private async inOwnTransaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      try {
        const result = await work(client);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: Error) => (broken = rollbackError));
        throw error;
      }
    } finally {
      client.release(broken);
    }
  }

  async claimJobs(queue: string, limit: number, workerId: string, leaseMs: number): Promise<ClaimResult> {
    const rows = await this.run<ClaimRow>('claimJobs', [queue, limit, workerId, leaseMs]);
    const jobs: ClaimedJob[] = [];
    let nextDueMs: number | null = null;
    for (const r of rows) {
      if (r.id === null) {
        nextDueMs = r.next_due_ms;
        continue;
      }
      jobs.push({
        id: r.id,
        payload: r.payload,
        attempt: r.attempts,
        maxAttempts: r.max_attempts,
        priority: r.priority,
        runAtMs: r.run_at_ms,
        createdAtMs: r.created_at_ms,
      });
    }
    return { jobs, nextDueMs };
  }

  /** Returns the ids fenced out (this worker no longer held them); every other job is completed. `deleteRows` deletes instead of keeping them. */
  async completeJobs(workerId: string, jobs: JobRef[], deleteRows = false): Promise<Set<string>> {
    const statement = deleteRows ? 'deleteCompletedJobs' : 'completeJobs';
    const rows = await this.run<{ id: string }>(statement, [workerId, jobs.map((j) => j.id), attemptsById(jobs)]);
    return new Set(rows.map((r) => r.id));
  }

  /** Returns each accepted id with the status it ended in (queued for a retry, failed when dead-lettered). */
  async failJobs(workerId: string, jobs: FailedAttempt[]): Promise<Map<string, JobStatus>> {
    const byId: Record<string, { attempt: number; error: string; delayMs: number }> = {};
    for (const j of jobs) byId[j.id] = { attempt: j.attempt, error: j.error, delayMs: j.retryDelayMs };
    const rows = await this.run<{ id: string; status: JobStatus }>('failJobs', [workerId, jobs.map((j) => j.id), JSON.stringify(byId)]);
    return new Map(rows.map((r) => [r.id, r.status]));
  }

  /** Returns the ids whose lease was renewed; any other id is no longer this worker's. */
  async extendLeases(workerId: string, leaseMs: number, jobs: JobRef[]): Promise<Set<string>> {
    const rows = await this.run<{ id: string }>('extendLeases', [workerId, leaseMs, jobs.map((j) => j.id), attemptsById(jobs)]);
    return new Set(rows.map((r) => r.id));
  }

  async releaseJobs(workerId: string, jobs: JobRef[]): Promise<number> {
    const rows = await this.run<{ released: number }>('releaseJobs', [workerId, jobs.map((j) => j.id), attemptsById(jobs)]);
    return rows[0]?.released ?? 0;
  }

  /** held=false: another instance is sweeping right now. */
  async rescueExpiredLeases(): Promise<{ held: boolean; requeued: number; failed: number }> {
    const [row] = await this.run<{ held: boolean | null; requeued: number; failed: number }>('rescueExpiredLeases', []);
    return { held: row.held !== false, requeued: row.requeued, failed: row.failed };
  }

  async deleteFinishedBefore(statuses: JobStatus[], olderThanMs: number, limit: number): Promise<{ held: boolean; deleted: number }> {
    const [row] = await this.run<{ held: boolean; deleted: number }>('deleteFinishedBefore', [statuses, olderThanMs, limit]);
    return row;
  }

  async getJob(id: string): Promise<JobRecord | null> {
    const [row] = await this.run<JobRow>('getJob', [id]);
    return row ? toJobRecord(row) : null;
  }

  async countByStatus(): Promise<QueueStats> {
    const rows = await this.run<{ queue_name: string; status: JobStatus; n: number }>('countByStatus', []);
    const stats: QueueStats = {};
    for (const r of rows) {
      stats[r.queue_name] ??= { queued: 0, processing: 0, completed: 0, failed: 0, cancelled: 0 };
      stats[r.queue_name][r.status] = r.n;
    }
    return stats;
  }

  /** 'cancelled' when this call cancelled it; else the job's (terminal) status, or 'not-found'. */
  async cancelJob(id: string): Promise<CancelResult> {
    const [row] = await this.run<{ was: JobStatus; cancelled: boolean }>('cancelJob', [id]);
    if (!row) return 'not-found';
    return row.cancelled ? 'cancelled' : row.was;
  }

  async pauseQueue(queue: string): Promise<void> {
    await this.run('pauseQueue', [queue]);
  }

  async resumeQueue(queue: string): Promise<void> {
    await this.run('resumeQueue', [queue]);
  }

  async pausedQueues(): Promise<string[]> {
    return (await this.run<{ queue_name: string }>('pausedQueues', [])).map((r) => r.queue_name);
  }

  async retryJob(id: string): Promise<boolean> {
    const [row] = await this.run<{ retried: boolean }>('retryJob', [id]);
    return row.retried;
  }
}

/**
 * Payload characters per insert statement. PostgreSQL caps one jsonb value (the statement's array of
 * payloads) at 256 MB, and jsonb takes up to 6 times the text's size (an array of small numbers): 16 MiB stays below.
 */
const INSERT_CHUNK_CHARS = 16 * 1_048_576;

/** Consecutive runs of rows whose payloads add up to at most `maxChars` (a row over it goes alone). */
function chunkByPayloadSize(rows: NewJobRow[], maxChars: number): NewJobRow[][] {
  const chunks: NewJobRow[][] = [];
  let chunk: NewJobRow[] = [];
  let chars = 0;
  for (const row of rows) {
    if (chunk.length > 0 && chars + row.payloadJson.length > maxChars) {
      chunks.push(chunk);
      chunk = [];
      chars = 0;
    }
    chunk.push(row);
    chars += row.payloadJson.length;
  }
  chunks.push(chunk);
  return chunks;
}

/** Inserts the chunks one statement each, in order; the ids in input order. */
async function insertChunks(chunks: NewJobRow[][], query: (text: string, values: unknown[]) => Promise<{ id: string }[]>): Promise<string[]> {
  const ids: string[] = [];
  for (const chunk of chunks) {
    const { statement, values } = insertJobsStatement(chunk);
    for (const r of await query(SQL[statement], values)) ids.push(r.id);
  }
  return ids;
}

/** The scalar statement when every row goes to one queue with the same options, else the array one. */
function insertJobsStatement(rows: NewJobRow[]): { statement: 'insertJobs' | 'insertUniformJobs'; values: unknown[] } {
  const payloads = `[${rows.map((r) => r.payloadJson).join(',')}]`;
  const first = rows[0];
  const uniform = rows.every(
    (r) =>
      r.queue === first.queue &&
      r.priority === first.priority &&
      r.maxAttempts === first.maxAttempts &&
      r.delayMs === first.delayMs &&
      r.runAt?.getTime() === first.runAt?.getTime(),
  );
  if (uniform) return { statement: 'insertUniformJobs', values: [first.queue, payloads, first.priority, first.maxAttempts, first.runAt, first.delayMs] };
  return {
    statement: 'insertJobs',
    values: [rows.map((r) => r.queue), payloads, rows.map((r) => r.priority), rows.map((r) => r.maxAttempts), rows.map((r) => r.runAt), rows.map((r) => r.delayMs)],
  };
}

/** {"id": attempt} as JSON, for the settle statements' per-row attempt lookup. */
function attemptsById(jobs: JobRef[]): string {
  const byId: Record<string, number> = {};
  for (const j of jobs) byId[j.id] = j.attempt;
  return JSON.stringify(byId);
}

/**
 * Runs a statement on the caller's EntityManager, so that it commits or rolls back with the caller's own
 * writes. Structured results keep INSERT ... RETURNING rows the same whatever TypeORM does with raw results.
 */
async function managerQuery(manager: EntityManager, text: string, values: unknown[]): Promise<{ id: string }[]> {
  if (manager.queryRunner) {
    const result = await manager.queryRunner.query(text, values, true);
    return result.records as { id: string }[];
  }
  return (await manager.query(text, values)) as { id: string }[];
}

interface ClaimRow {
  id: string | null;
  payload: unknown;
  attempts: number;
  max_attempts: number;
  priority: number;
  run_at_ms: number;
  created_at_ms: number;
  next_due_ms: number | null;
}

interface JobRow {
  id: string;
  queue_name: string;
  payload: unknown;
  status: JobStatus;
  priority: number;
  attempts: number;
  max_attempts: number;
  run_at: Date;
  last_error: string | null;
  locked_by: string | null;
  locked_at: Date | null;
  lease_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

function toJobRecord(r: JobRow): JobRecord {
  return {
    id: r.id,
    queue: r.queue_name,
    payload: r.payload,
    status: r.status,
    priority: r.priority,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    runAt: r.run_at,
    lastError: r.last_error,
    lockedBy: r.locked_by,
    lockedAt: r.locked_at,
    leaseExpiresAt: r.lease_expires_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    finishedAt: r.finished_at,
  };
}
