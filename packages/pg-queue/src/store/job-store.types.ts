// The types of the job store's methods: what a claim returns, what an enqueue and a settle take.
import type { JobStatus } from '../interfaces/job.interface.js';

/** A job as claimed: what the worker needs to run one attempt. */
export interface ClaimedJob {
  id: string;
  payload: unknown;
  attempt: number;
  /** This claim's fence token (int8 as text): only the holder of the latest claim may settle or renew the job. */
  token: string;
  maxAttempts: number;
  priority: number;
  /** Epoch milliseconds; the Job turns them into Dates only if a handler asks. */
  runAtMs: number;
  createdAtMs: number;
  /** Claim latency: ms from the job's run_at to this claim, by the database clock (absent for test jobs). */
  waitMs?: number;
  /** The W3C trace context the job was enqueued under (trace_context column), or null: see tracing/trace-context.ts. */
  traceContext?: unknown;
  /** Claimed ahead of a free slot: not started, not charged, on a short lease (see plainClaim in claim.sql.ts). */
  buffered?: boolean;
  /** The row has no unique key, so no successor waits for it (false: it may have one): see completeJobsKeyless. */
  keyless?: boolean;
}

export interface ClaimResult {
  jobs: ClaimedJob[];
  /** When the claim came back short: ms until the queue's next delayed job, or null if none is waiting. */
  nextDueMs: number | null;
  /** A limited claim cut short by the queue's rate limit: ms until its window lets another job start. */
  rateWaitMs?: number | null;
  /** A limited claim cut short because the queue runs its globalConcurrency jobs (in all processes), or keyed jobs run. */
  atCapacity?: boolean;
  /** A keyed claim: the key cursor to pass to the next claim (the last key claimed from, in turn order). */
  keyCursor?: string;
  /** A keyed or fair claim that looked for due jobs without a key (lookKeyless): whether it found any. */
  keylessSeen?: boolean;
  /** A limited claim that never got its queue's lock (another claimer held it throughout): no answer about the queue. */
  lockBusy?: boolean;
}

/** The limits a claim of a limited queue enforces across every instance. */
export interface ClaimLimits {
  globalConcurrency: number | undefined;
  rateLimit: { max: number; intervalMs: number } | undefined;
  concurrencyPerKey?: number | undefined;
  /** Fair share across keys: the option's weights and the default weight (weights stored at runtime win). */
  fairness?: { weights: Record<string, number>; defaultWeight: number } | undefined;
}

export interface NewJobRow {
  queue: string;
  payloadJson: string;
  priority: number;
  maxAttempts: number;
  runAt: Date | null;
  delayMs: number;
  /** Unique jobs: the key (null or absent: a plain job), what a duplicate does, and the window if any. */
  uniqueKey?: string | null;
  onConflict?: OnConflict;
  uniqueForMs?: number | null;
  concurrencyKey: string | null;
  /** Enqueued with `lifo: true` (absent otherwise): claimed before the FIFO jobs of its priority, newest first. */
  lifo?: true;
}

/** What an enqueue with a unique key does when a job already holds the key (see README, Unique jobs). */
export type OnConflict = 'keep' | 'replace' | 'keep-run-at' | 'queue-after';

/**
 * inserted: a new job; replaced: the queued holder took this call's payload (and run_at); duplicate: nothing changed;
 * successor: a new job that waits for the key's running holder to end (onConflict 'queue-after'); successor-replaced:
 * the successor already waiting took this call's payload (and run_at).
 */
export type EnqueueOutcome = 'inserted' | 'replaced' | 'duplicate' | 'successor' | 'successor-replaced';

/**
 * A settle statement's answer, and the ids of the jobs of flows it finished (undefined: none): their dependents and
 * flows get a second look once it committed (FlowStore.recheckFlowJobs).
 */
export interface SettledBatch<A> {
  answer: A;
  flowJobs: string[] | undefined;
}

/** One claim of a job, as the fenced statements (settle, heartbeat, put-back) name it. */
export interface JobRef {
  id: string;
  token: string;
}

/**
 * The lines a handler logged (job.log(): README, "Job logs") and no statement has written yet, as the worker sends them
 * for one job (appendLogs in shared.sql.ts): the module's jobLogs.maxLines (`m`: the row keeps the newest that many),
 * and each line as [its number in the attempt, ms it waited in the worker, its text].
 */
export interface LogEntry {
  m: number;
  l: [seq: number, msAgo: number, line: string][];
}

export interface FailedAttempt extends JobRef {
  error: string;
  retryDelayMs: number;
  /** Fail the job for good, whatever attempts it has left (a result the queue cannot store). */
  final?: boolean;
  /** The handler's last progress (JSON text) not written yet. */
  progressJson?: string;
  /** Lines the handler logged and no statement has written yet. */
  logEntry?: LogEntry;
}

/** A completed attempt: its claim, and the handler's result and last progress as JSON text when it has them. */
export interface CompletedAttempt extends JobRef {
  /** The claim said the row has no unique key: a batch of such jobs completes without the successor step. */
  keyless?: boolean;
  resultJson?: string;
  progressJson?: string;
  /** Lines the handler logged and no statement has written yet. */
  logEntry?: LogEntry;
}

/** Where a job stands, for waitFor(). */
export interface JobOutcome {
  status: JobStatus;
  result: unknown;
  lastError: string | null;
}

export interface SnoozedAttempt extends JobRef {
  delayMs: number;
  /** Written to last_error (a partner's 429: RateLimitedError); a plain snooze leaves last_error as it was. */
  note?: string;
  /** Lines the handler logged and no statement has written yet. */
  logEntry?: LogEntry;
}

/** A claim put back (shutdown), with the lines its handler logged and no statement has written yet. */
export interface ReleasedJob extends JobRef {
  logEntry?: LogEntry;
}

export type CancelResult = 'cancelled' | 'not-found' | JobStatus;

/**
 * What QueueService's promote / changePriority / changeRunAt / changeDelay / updatePayload answer: 'changed', or why
 * not: 'running' (its handler started), 'held' (claimed into a worker's read-ahead buffer, about to start), its final
 * status, or 'not-found'. Nothing changes unless the answer is 'changed'.
 */
export type ChangeResult = 'changed' | 'not-found' | 'running' | 'held' | 'completed' | 'failed' | 'cancelled';

/** A change to a job that has not started (store/job-control.store.ts changeJob); absent fields are kept. */
export interface JobChange {
  priority?: number;
  /** Due now: run_at becomes now() when it is later (an earlier run_at is kept: the job keeps its place). */
  promote?: boolean;
  runAt?: Date;
  delayMs?: number;
  /** The new payload as JSON text (serialized and validated as at enqueue). */
  payloadJson?: string;
  /** Change only a job of this queue (the one whose validator checked the payload). */
  queue?: string;
}

export interface JobStoreOptions {
  /** Send every statement unnamed: named prepared statements fail behind a transaction pooler. */
  transactionPooler?: boolean;
  /** The pool's size and connect timeout, named in the error when no connection comes free in time. */
  poolSize?: number;
  connectTimeoutMs?: number;
  /** The option that sizes the pool, named in that error. Default 'poolSize'. */
  poolSizeOption?: string;
}

/** What SQL.databaseIdentity reads. */
export interface DatabaseIdentityRow {
  database: string;
  started: string;
  host: string;
  port: number | null;
}
