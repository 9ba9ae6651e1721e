// An operator's actions on one job or queue (QueueService): cancel, retry, pause, resume.
import type { JobStatus } from '../interfaces/job.interface.js';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { RETRY_PARENT_GONE, RETRY_PARENT_NOT_COMPLETED, UNIQUE_KEY_RETRY_TAKEN } from '../pg-queue.messages.js';
import { HISTORY_SQL } from './history.sql.js';
import { inTransaction } from './in-transaction.js';
import type { JobStatements } from './job-statements.js';
import { SQL } from './job.sql.js';
import type { CancelResult, ChangeResult, JobChange } from './job-store.types.js';

/** 'cancelled' when this call cancelled it; else the job's (terminal) status, or 'not-found'. */
export async function cancelJob(db: JobStatements, id: string): Promise<CancelResult> {
  const [row] = await db.run<{ was: JobStatus; cancelled: boolean }>('cancelJob', [id]);
  if (!row) return 'not-found';
  return row.cancelled ? 'cancelled' : row.was;
}

/**
 * Changes a job that has not started and that no worker holds (CHANGEABLE in job-control.sql.ts): 'changed', else
 * what stopped it ('running', 'held' for a job in a worker's read-ahead buffer, its final status, or 'not-found').
 * `change.queue`: change it only if it is still a job of that queue (whose validator checked the new payload).
 */
export async function changeJob(db: JobStatements, id: string, change: JobChange): Promise<ChangeResult> {
  const values = [id, change.priority ?? null, change.promote ?? false, change.runAt ?? null, change.delayMs ?? null, change.payloadJson !== undefined, change.payloadJson ?? null, change.queue ?? null];
  const [row] = await db.run<{ was: JobStatus; buffered: boolean; changed: boolean }>('changeJob', values);
  if (!row) return 'not-found';
  if (row.changed) return 'changed';
  if (row.was === 'processing') return row.buffered ? 'held' : 'running';
  // queued or blocked, yet not changed: it moved to another queue's name between the validation and the change
  // (a job's queue never changes; only a deleted job re-created under its id could do that): as not found.
  return row.was === 'queued' || row.was === 'blocked' ? 'not-found' : row.was;
}

/** The queue of job `id` (in background_jobs or partitioned history), or null. */
export async function jobQueue(db: JobStatements, id: string): Promise<string | null> {
  const [row] = await db.run<{ queue_name: string }>('jobQueue', [id]);
  return row?.queue_name ?? null;
}

export async function pauseQueue(db: JobStatements, queue: string): Promise<void> {
  await db.run('pauseQueue', [queue]);
}

export async function resumeQueue(db: JobStatements, queue: string): Promise<void> {
  await db.run('resumeQueue', [queue]);
}

export async function pausedQueues(db: JobStatements): Promise<string[]> {
  return (await db.run<{ queue_name: string }>('pausedQueues', [])).map((r) => r.queue_name);
}

export async function retryJob(db: JobStatements, id: string, resetSteps = false): Promise<boolean> {
  try {
    const [row] = await db.run<RetryRow>('retryJob', [id, resetSteps]);
    if (row.retried) return true;
    refuseWaitingForParent(id, row);
    return await retryFromHistory(db, id, resetSteps);
  } catch (error) {
    // The job's unique key was freed when it failed, and another job took it since.
    const e = error as { code?: string; constraint?: string };
    if (e.code === '23505' && e.constraint === 'background_jobs_unique_key_idx') throw new PgQueueError(UNIQUE_KEY_RETRY_TAKEN(id), { cause: error });
    throw error;
  }
}

/**
 * retry() of a job partitioned history holds (README: "Long retention: partitioned history"): it comes back to
 * background_jobs (with its flow's jobs) and is retried there, in one transaction, so that the mover cannot take it
 * away again in between. False when history holds no failed or cancelled job of that id either.
 */
function retryFromHistory(db: JobStatements, id: string, resetSteps: boolean): Promise<boolean> {
  return inTransaction(db.pool, async (client) => {
    const [back] = (await client.query<{ n: number }>({ text: HISTORY_SQL.bringBack, values: [[id]] })).rows;
    if (back.n === 0) return false;
    const [row] = (await client.query<RetryRow>({ text: SQL.retryJob, values: [id, resetSteps] })).rows;
    // A refusal rolls the bring-back back: the flow stays in history as it was.
    if (!row.retried) refuseWaitingForParent(id, row);
    return row.retried;
  });
}

interface RetryRow {
  retried: boolean;
  parent_id: string | null;
  parent_ref: string | null;
  parent_status: string | null;
}

/** A flow job that waits for a parent is not retried: the error names the parent (RETRY_WAITS_FOR_PARENT in job-control.sql.ts). */
function refuseWaitingForParent(id: string, row: RetryRow): void {
  if (row.parent_id === null) return;
  throw new PgQueueError(row.parent_status === null ? RETRY_PARENT_GONE(id, row.parent_id) : RETRY_PARENT_NOT_COMPLETED(id, row.parent_id, row.parent_ref, row.parent_status));
}
