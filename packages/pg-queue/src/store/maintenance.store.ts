// Maintenance: the sweeper's and the pruner's statements on jobs.
import type { JobStatus } from '../interfaces/job.interface.js';
import type { JobStatements } from './job-statements.js';
import { RETENTION_CAP_MS } from './shared.sql.js';

/** held=false: another instance is sweeping right now. */
export async function rescueExpiredLeases(db: JobStatements): Promise<{ held: boolean; requeued: number; failed: number; openFlows: boolean }> {
  const [row] = await db.run<{ held: boolean | null; requeued: number; failed: number; open_flows: boolean }>('rescueExpiredLeases', []);
  return { held: row.held !== false, requeued: row.requeued, failed: row.failed, openFlows: row.open_flows };
}

/**
 * One prune batch of `statuses` past `olderThanMs`. `flowRetentionMs`: the longest retention of any status (null:
 * kept for ever); a flow with a failed or cancelled job keeps all its jobs that long (default: `olderThanMs`).
 */
export async function deleteFinishedBefore(db: JobStatements, statuses: JobStatus[], olderThanMs: number, limit: number, flowRetentionMs: number | null = olderThanMs): Promise<{ held: boolean; deleted: number }> {
  const longest = flowRetentionMs === null ? RETENTION_CAP_MS : Math.max(olderThanMs, flowRetentionMs);
  const [row] = await db.run<{ held: boolean; deleted: number }>('deleteFinishedBefore', [statuses, olderThanMs, limit, longest]);
  return row;
}

/** Deletes up to `limit` expired uniqueForMs windows; returns how many. */
export async function deleteExpiredJobKeys(db: JobStatements, limit: number): Promise<number> {
  const [row] = await db.run<{ deleted: number }>('deleteExpiredJobKeys', [limit]);
  return row.deleted;
}

/**
 * The sweeper's safety net for successors (onConflict 'queue-after'): up to `limit` keys whose successor still waits
 * get their step (stepStrandedSuccessors); returns how many successors it promoted (normally none: the statement that
 * ended the holder did).
 */
export async function stepStrandedSuccessors(db: JobStatements, limit: number): Promise<number> {
  const [row] = await db.run<{ promoted: number }>('stepStrandedSuccessors', [limit]);
  return row.promoted;
}
