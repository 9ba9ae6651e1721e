// Reads of jobs: one job and its attempts, what waitFor() marks and polls, the counts of stats(), the database's identity.
import type { JobAttemptRecord, JobRecord, JobStatus, QueueStats } from '../interfaces/job.interface.js';
import { toJobSteps } from '../steps/step.interfaces.js';
import { storedLogs } from '../utils/stored-logs.js';
import type { JobStatements } from './job-statements.js';
import type { DatabaseIdentityRow, JobOutcome } from './job-store.types.js';

/** stats() counts exactly up to this many jobs per queue and status, and estimates above it. */
export const STATS_EXACT_LIMIT = 10_000;
/** Pages of the table an estimate samples: a bounded read whatever the table's size. */
const STATS_SAMPLE_PAGES = 1_000;

/** What countByStatus counts: the job statuses, with buffered jobs apart from running ones (then folded into queued). */
type Counted = JobStatus | 'buffered';
const IN_FLIGHT: readonly Counted[] = ['processing', 'buffered'];

/**
 * Marks a job as awaited (its finish will be notified on DONE_CHANNEL) and says where it stands; null when
 * there is no such job. Read again when a settle committed between the mark and the read.
 */
export async function markAwaited(db: JobStatements, id: string): Promise<JobOutcome | null> {
  const [row] = await db.run<OutcomeRow & { marked: boolean }>('markAwaited', [id]);
  if (!row) return null;
  if (!row.marked && (row.status === 'queued' || row.status === 'processing')) return (await jobOutcomes(db, [id])).get(id) ?? null;
  return toOutcome(row);
}

/** Where each job of `ids` stands; an id missing from the map has no row (never existed, or deleted). */
export async function jobOutcomes(db: JobStatements, ids: string[]): Promise<Map<string, JobOutcome>> {
  const rows = await db.run<OutcomeRow>('jobOutcomes', [ids]);
  return new Map(rows.map((r) => [r.id, toOutcome(r)]));
}

/** The job's row, with its attempt history when it has one (a job that never failed has none: no second read). */
export async function getJob(db: JobStatements, id: string): Promise<JobRecord | null> {
  const [row] = await db.run<JobRow>('getJob', [id]);
  if (!row) return null;
  const record = toJobRecord(row);
  if (row.last_error !== null) record.history = await jobAttempts(db, id);
  return record;
}

/** A job's recorded attempts (README: "Attempt history"), oldest first; [] before the AttemptHistory migration. */
export async function jobAttempts(db: JobStatements, id: string): Promise<JobAttemptRecord[]> {
  try {
    const rows = await db.run<AttemptRow>('jobAttempts', [id]);
    return rows.map((r) => ({
      attempt: r.attempt,
      worker: r.worker,
      startedAt: r.started_at,
      finishedAt: r.finished_at,
      durationMs: r.duration_ms,
      outcome: r.outcome,
      error: r.error,
    }));
  } catch (error) {
    if ((error as { code?: string }).code === '42P01') return [];
    throw error;
  }
}

/**
 * Counts per queue and status: exact up to STATS_EXACT_LIMIT per queue and status (a status's finished jobs,
 * and in-flight jobs, are counted exactly while they number at most that in all), estimated from a sample of
 * about STATS_SAMPLE_PAGES pages above it; `approximate` lists the statuses of a queue that are estimates.
 * A buffered job (in a worker's read-ahead buffer, not started) counts as queued, not processing.
 * `exactLimit`: another cap (the dashboard counts exactly up to a lower one, to answer sooner).
 */
export async function countByStatus(db: JobStatements, exactLimit = STATS_EXACT_LIMIT): Promise<QueueStats> {
  const rows = await db.run<{ queue_name: string | null; status: Counted | 'pages' | 'history_pages'; n: number }>('countByStatus', [exactLimit]);
  const counted: Record<string, Record<Counted, number>> = {};
  const estimated: Record<string, Set<Counted>> = {};
  const entry = (queue: string) => (counted[queue] ??= { queued: 0, blocked: 0, buffered: 0, processing: 0, completed: 0, failed: 0, cancelled: 0 });
  const totals = new Map<Counted, number>();
  const over: { queue: string | null; status: Counted }[] = [];
  let pages = 0;
  let historyPages = 0;
  for (const r of rows) {
    if (r.status === 'pages') {
      pages = r.n;
      continue;
    }
    if (r.status === 'history_pages') {
      historyPages = r.n;
      continue;
    }
    entry(r.queue_name!)[r.status] = r.n;
    totals.set(r.status, (totals.get(r.status) ?? 0) + r.n);
    if (r.status === 'queued' && r.n > exactLimit) over.push({ queue: r.queue_name, status: r.status });
  }
  for (const [status, total] of totals) if (!IN_FLIGHT.includes(status) && status !== 'queued' && total > exactLimit) over.push({ queue: null, status });
  // Running and buffered jobs are one capped read of the in-flight rows: past the cap, both are partial.
  if (IN_FLIGHT.reduce((n, s) => n + (totals.get(s) ?? 0), 0) > exactLimit) for (const status of IN_FLIGHT) over.push({ queue: null, status });

  if (over.length > 0) {
    const percent = Math.min(100, (100 * STATS_SAMPLE_PAGES) / Math.max(pages, 1));
    const historyPercent = Math.min(100, (100 * STATS_SAMPLE_PAGES) / Math.max(historyPages, 1));
    const sample = await db.run<{ queue_name: string; status: Counted; n: string }>('countSample', [percent, historyPercent]);
    for (const { queue, status } of over) {
      // A status over the limit in all is re-estimated for every queue: the exact rows read cover only some.
      if (queue === null) for (const counts of Object.values(counted)) counts[status] = 0;
      for (const s of sample) {
        if (s.status !== status || (queue !== null && s.queue_name !== queue)) continue;
        entry(s.queue_name)[status] = Number(s.n);
      }
      for (const [name, counts] of Object.entries(counted)) {
        if (queue !== null && name !== queue) continue;
        // Never report less than what was counted exactly.
        if (queue !== null) counts[status] = Math.max(counts[status], exactLimit + 1);
        (estimated[name] ??= new Set()).add(status);
      }
    }
  }

  const stats: QueueStats = {};
  for (const [name, { buffered, ...counts }] of Object.entries(counted)) {
    stats[name] = { ...counts, queued: counts.queued + buffered };
    const approximate = [...new Set([...(estimated[name] ?? [])].map((s) => (s === 'buffered' ? 'queued' : s)))];
    if (approximate.length > 0) stats[name].approximate = approximate;
  }
  return stats;
}

/** Which database the queue's pool is on (databases/database-check.ts). */
export async function databaseIdentity(db: JobStatements): Promise<DatabaseIdentityRow> {
  return (await db.run<DatabaseIdentityRow>('databaseIdentity', []))[0];
}

export interface JobRow {
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
  unique_key: string | null;
  concurrency_key: string | null;
  result?: unknown;
  progress?: unknown;
  /** Claimed into a worker's read-ahead buffer, not started (absent before the BufferedJobs migration). */
  buffered?: boolean;
  flow_id?: string | null;
  flow_ref?: string | null;
  steps?: unknown;
  /** What job.log() wrote (absent before the JobLogs migration). */
  logs?: unknown;
  lifo?: boolean | null;
  /** getJob only (JOB_READ_SQL): onConflict 'queue-after', the successor waiting for this job, or the holder it waits for. */
  successor_id?: string | null;
  waits_for_id?: string | null;
}

interface AttemptRow {
  attempt: number;
  worker: string | null;
  started_at: Date | null;
  finished_at: Date;
  outcome: JobAttemptRecord['outcome'];
  error: string | null;
  duration_ms: number | null;
}

interface OutcomeRow {
  id: string;
  status: JobStatus;
  result: unknown;
  last_error: string | null;
}

function toOutcome(r: OutcomeRow): JobOutcome {
  return { status: r.status, result: r.result ?? null, lastError: r.last_error };
}

export function toJobRecord(r: JobRow): JobRecord {
  const logs = storedLogs(r.logs);
  return {
    id: r.id,
    queue: r.queue_name,
    payload: r.payload,
    // A buffered job has not started: it waits, as a queued one does.
    status: r.status === 'processing' && r.buffered === true ? 'queued' : r.status,
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
    uniqueKey: r.unique_key,
    concurrencyKey: r.concurrency_key,
    lifo: r.lifo === true,
    successorId: r.successor_id ?? null,
    waitsForId: r.waits_for_id ?? null,
    result: r.result ?? null,
    progress: r.progress ?? null,
    flowId: r.flow_id ?? null,
    flowRef: r.flow_ref ?? null,
    steps: toJobSteps(r.steps),
    history: [],
    logs: logs.lines,
    logsDropped: logs.dropped,
  };
}
