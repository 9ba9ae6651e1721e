import type { CompensatedJob, FlowJobSpec, ParentJob } from '../flows/flow.interfaces.js';
import type { EntityManager } from 'typeorm';
import type { QueueDefinition } from '../typed/queue-definition.js';
import type { JobStep } from '../steps/step.interfaces.js';
import type { JobStatus } from './job-status.js';
import type { Jsonified } from './jsonified.js';

export type { JobStatus } from './job-status.js';

/** What a handler receives: one attempt of one job. */
export interface Job<TPayload = unknown> {
  /** bigint primary key, as a string so that no precision is lost. */
  readonly id: string;
  readonly queue: string;
  readonly payload: TPayload;
  /** 1 on the first run, 2 on the first retry, ... */
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly priority: number;
  readonly runAt: Date;
  readonly createdAt: Date;
  /** Aborted when the attempt times out, the job is cancelled, the lease is lost, or shutdown outlasts its grace period. */
  readonly signal: AbortSignal;
  /**
   * Reports how far the attempt got: a number or a small JSON value (at most MAX_PROGRESS_BYTES, 4 KiB, as
   * JSON), read back as `JobRecord.progress`. Cheap to call in a loop: the value is kept in memory and the
   * last one is written with the next heartbeat (or with the attempt's outcome), never in a statement of its
   * own. A value that is not JSON or is too large throws a PgQueueError at the call.
   */
  progress(value: unknown): void;
  /**
   * Adds a line to the job's log (README: "Job logs"), read back per attempt with `QueueService.get(id).logs`, on the
   * dashboard's job page and with `pg-queue jobs show`. Cheap to call: the line is kept in memory and written with the
   * next heartbeat or with the attempt's outcome, never in a statement of its own (an attempt that never logs writes
   * nothing more than before). Each line records its attempt and when it was logged (the database clock). The row keeps
   * the newest `jobLogs.maxLines` lines (100 by default; the oldest go first), each cut to `jobLogs.maxLineLength`
   * characters (2,000). Lines logged after the last heartbeat of an attempt whose process dies are lost with it. A value
   * that is not a string is logged as util.inspect shows it; never throws.
   */
  log(line: string): void;
  /**
   * A job of a flow: its parents, each with its status and result (a parent it depends on with 'continue' may have
   * failed). [] for a job without parents. Read when called (one query).
   */
  parents(): Promise<ParentJob[]>;
  /** One parent by its ref; pass the parent's queue definition to type its result. Throws when there is no such parent. */
  parent<TResult = unknown>(ref: string, queue?: QueueDefinition<unknown, TResult>): Promise<ParentJob<TResult>>;
  /** A compensation job: the job it undoes, with that job's payload and result; null for any other job. */
  compensating<TPayload = unknown, TResult = unknown>(queue?: QueueDefinition<TPayload, TResult>): Promise<CompensatedJob<TPayload, TResult> | null>;
  /**
   * Adds jobs to this job's flow, created in the statement that completes this attempt: if the attempt fails, or its
   * outcome is fenced out (the lease was lost), none is created. dependsOn names refs of the same call; each ref
   * becomes "<this job's ref>/<ref>". Calls add up; checked at the call (a PgQueueError names the problem). A job
   * whose uniqueKey a live job holds refuses the call (the error names the job and the holder; nothing of the call
   * is recorded: catch it to go on without it); a key taken after the call makes that job a duplicate that the
   * completion does not create (its dependents in the spawn do not wait for it). A held key never fails the completion.
   * A call of an attempt that was aborted (timeout, cancel, lost lease, shutdown), before or while it waited, records
   * nothing and throws the abort's reason, as a step does.
   */
  spawn(jobs: readonly FlowJobSpec[]): Promise<void>;
  /**
   * A durable step (docs/guides/durable-steps.md): the first time, runs `run` and records its result (JSON) with the
   * job, fenced by this attempt's lease, before returning it; on a later attempt of the same job (after a failure,
   * a crash, a sleep), returns the recorded result without running `run`. The result is always the JSON round trip,
   * and typed so (`Jsonified<T>`: a Date comes back as a string, on the first run as on a replay). At-least-once per step: a step whose record
   * was lost to a crash runs again. Names are unique within an attempt; a step that throws records nothing.
   */
  step<T>(name: string, run: () => T | PromiseLike<T>): Promise<Jsonified<T>>;
  /**
   * A durable pause: the first time, records the sleep and ends the attempt (it throws a JobSnoozedError: let it
   * propagate), uncharged, with the job due again in `ms`; the next attempt passes it once that time has come (by
   * the database clock), and its earlier steps return their recorded results.
   */
  sleep(name: string, ms: number): Promise<void>;
}

/**
 * A job of a batch handler's call (`batch: { size }`): a Job, plus ways to settle it on its own, whatever the batch's
 * call does. The last one called before the call ends wins; one called after it ends changes nothing.
 */
export interface BatchJob<TPayload = unknown> extends Job<TPayload> {
  /** Completes this job (with `result` as its result) even if the call throws. */
  complete(result?: unknown): void;
  /** Fails this attempt of this job with `error` (retried with backoff, or dead-lettered), even if the call resolves. */
  fail(error: unknown): void;
  /** Puts this job back to run again in `ms` without using up an attempt (as a JobSnoozedError would). */
  snooze(ms: number): void;
}

/** What a transactional handler (`transactional: true`) receives: a Job with its transaction's EntityManager. */
export interface TransactionalJob<TPayload = unknown> extends Job<TPayload> {
  /**
   * The transaction the handler runs in, on the app's DataSource: write through it, and the writes commit with the
   * job's completion (or roll back with a failure, a lost lease, a cancel or a timeout).
   */
  readonly manager: EntityManager;
}


/** A row of background_jobs, as `QueueService.get` returns it. */
export interface JobRecord<TPayload = unknown, TResult = unknown> {
  id: string;
  queue: string;
  payload: TPayload;
  status: JobStatus;
  priority: number;
  attempts: number;
  maxAttempts: number;
  runAt: Date;
  lastError: string | null;
  lockedBy: string | null;
  lockedAt: Date | null;
  leaseExpiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
  /** The job's unique key while it holds one without a window (README: Unique jobs), else null. */
  uniqueKey: string | null;
  /** The key the queue's concurrencyPerKey limit counts the job under, if enqueued with one. */
  concurrencyKey: string | null;
  /** Enqueued with `lifo: true`: claimed before the FIFO jobs of its priority, newest first (README: LIFO). */
  lifo: boolean;
  /**
   * onConflict 'queue-after' (README: Unique jobs): the job that waits for this one, the key's queued or running
   * holder, to end (`successorId`); or, for that waiting job (status `blocked`), the holder it waits for
   * (`waitsForId`). null otherwise.
   */
  successorId: string | null;
  waitsForId: string | null;
  /** What the handler returned, once completed (README: Results); null when it returned nothing (undefined or null). */
  result: TResult | null;
  /** The last value the handler gave `job.progress()` that was written (with a heartbeat or the outcome); null when none. */
  progress: unknown;
  /** The flow the job belongs to (QueueService.getFlow), and its ref there; null for a job enqueued alone. */
  flowId: string | null;
  flowRef: string | null;
  /** What job.step() and job.sleep() recorded, in order ([] when none). */
  steps: JobStep[];
  /**
   * The attempts that did not complete, oldest first (README: "Attempt history"): each failure and each lease that
   * expired, with its worker, times and error. [] for a job that never failed; the job's own row is its latest attempt.
   */
  history: JobAttemptRecord[];
  /**
   * The lines handlers wrote with job.log() (README: "Job logs"), oldest first, each with the attempt that wrote it
   * (`logs.filter((l) => l.attempt === 2)`: the second attempt's). At most the module's `jobLogs.maxLines`: [] for a
   * job that never logged.
   */
  logs: JobLogLine[];
  /** How many older lines the `jobLogs.maxLines` bound dropped (0 when none). */
  logsDropped: number;
}

/** A line a handler wrote with job.log() (README: "Job logs"). */
export interface JobLogLine {
  /** The attempt that wrote it (1: the first run; a retry() starts counting again, as the attempt history does). */
  attempt: number;
  /**
   * When it was logged, by the database clock: the time of the statement that wrote it (the next heartbeat, or the
   * attempt's outcome) less how long the line had waited in the worker, as the worker's monotonic clock measured it.
   */
  at: Date;
  /** The text, cut to `jobLogs.maxLineLength` characters (then ending "... [truncated]"). */
  line: string;
}

/** One attempt of a job that did not complete (background_job_attempts). */
export interface JobAttemptRecord {
  /** The attempt's number (1: the first run); a retry() starts counting again. */
  attempt: number;
  /** The worker id that ran it (the module's workerId). */
  worker: string | null;
  /** When it was claimed, and when it ended (database clock). */
  startedAt: Date | null;
  finishedAt: Date;
  durationMs: number | null;
  /** 'failed': the handler threw (or timed out, or its result could not be stored); 'lease-expired': its worker stopped renewing the lease (crashed, frozen, cut off). */
  outcome: 'failed' | 'lease-expired';
  /** The error text, as last_error stores it. */
  error: string | null;
}

/** Job counts of one queue by status. */
export type QueueCounts = Record<JobStatus, number> & {
  /** Present only when some counts are estimates (more than 10,000 jobs of that status): those statuses. */
  approximate?: JobStatus[];
};

/** Per-queue job counts by status. */
export type QueueStats = Record<string, QueueCounts>;
