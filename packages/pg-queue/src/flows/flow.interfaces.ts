import type { JobStatus } from '../interfaces/job-status.js';
import type { QueueDefinition } from '../typed/queue-definition.js';

/**
 * What a dependent does when this parent fails for good or is cancelled:
 * - 'fail' (default): the dependent ends failed (cancelled, when the parent was cancelled), naming the parent;
 * - 'cancel': the dependent ends cancelled, naming the parent;
 * - 'continue': the edge counts as resolved; the dependent runs once its other parents are done, and reads what
 *   became of this one from `job.parents()`.
 */
export type OnParentFailure = 'fail' | 'cancel' | 'continue';

/** A parent of a flow job: its ref, or its ref with the dependent's policy when it fails. */
export type FlowDependency = string | { ref: string; onFailure?: OnParentFailure };

/** The job to run if the flow fails for good after this job completed (its saga step's undo). */
export interface FlowCompensation<TPayload = unknown> {
  queue: string | QueueDefinition<TPayload, unknown>;
  payload: TPayload;
  /** Default: the compensation queue's maxAttempts, as for enqueue. */
  maxAttempts?: number;
  priority?: number;
}

/** One job of a flow: a job spec as enqueueMany takes it, named by `ref`, with the refs it waits for. */
export interface FlowJobSpec<TPayload = unknown> {
  /** The job's name in its flow: 1 to 128 characters from A-Z a-z 0-9 _ . : - */
  ref: string;
  queue: string | QueueDefinition<TPayload, unknown>;
  payload: TPayload;
  /** Parents, by ref: the job is blocked until each one completed (or failed, for a 'continue' dependency). */
  dependsOn?: readonly FlowDependency[];
  compensate?: FlowCompensation;
  runAt?: Date;
  delayMs?: number;
  priority?: number;
  maxAttempts?: number;
  concurrencyKey?: string;
  /** Only on a job without dependsOn: held from the enqueue; a key already held refuses the whole flow. */
  uniqueKey?: string;
}

export interface FlowSpec {
  /** Shown by getFlow, the CLI and the dashboard. */
  name?: string;
  jobs: readonly FlowJobSpec[];
}

/**
 * The jobs of an enqueueFlow call, each checked against its own queue as enqueueMany's are (JobSpecs): a job whose
 * queue is a definition must carry that definition's payload type (jobs of several definitions may be mixed); a job
 * named by a string takes any payload. A compensation's payload is not checked against its queue's definition.
 */
export type FlowJobSpecs<T extends readonly unknown[]> = {
  [K in keyof T]: Omit<FlowJobSpec, 'queue' | 'payload'> & { queue: string | QueueDefinition<T[K], unknown>; payload: NoInfer<T[K]> };
};

export interface EnqueuedFlow {
  id: string;
  /** Each job's id, by ref. */
  jobs: Record<string, string>;
}

/**
 * running -> completed; running -> failing (a job failed for good: nothing else of it starts) -> failed, or ->
 * compensating (the compensations of its completed jobs run, in reverse order) -> compensated |
 * compensation_failed; any unfinished state -> cancelled (cancelFlow).
 */
export type FlowStatus = 'running' | 'failing' | 'compensating' | 'completed' | 'failed' | 'compensated' | 'compensation_failed' | 'cancelled';

/** Every flow status, in the order of a flow's life (the dashboard's and the command line's filters). */
export const FLOW_STATUSES: readonly FlowStatus[] = ['running', 'failing', 'compensating', 'completed', 'failed', 'compensated', 'compensation_failed', 'cancelled'];

export const FINAL_FLOW_STATUSES: readonly FlowStatus[] = ['completed', 'failed', 'compensated', 'compensation_failed', 'cancelled'];

export interface FlowJobRecord {
  id: string;
  ref: string | null;
  queue: string;
  /** A job read ahead into a worker's buffer shows as queued, as everywhere else. */
  status: JobStatus;
  attempts: number;
  maxAttempts: number;
  lastError: string | null;
  result: unknown;
  /** Set on a compensation job: the id of the job it undoes. */
  compensates: string | null;
  lockedBy: string | null;
  runAt: Date;
  finishedAt: Date | null;
  /** A blocked job: the refs of the parents it still waits for. */
  waitingFor: string[];
}

export interface FlowEdge {
  parent: string;
  child: string;
  onFailure: OnParentFailure;
  /** The parent is done with it (completed, or failed for a 'continue' dependency). */
  done: boolean;
}

export interface FlowRecord {
  id: string;
  name: string | null;
  status: FlowStatus;
  /** Why it failed or was cancelled ("job 12 (ship) failed"). */
  reason: string | null;
  failedJobId: string | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
  jobs: FlowJobRecord[];
  edges: FlowEdge[];
}

/** A parent as `job.parents()` gives it. */
export interface ParentJob<TResult = unknown> {
  id: string;
  ref: string | null;
  queue: string;
  status: JobStatus;
  /** What it returned, when it completed. */
  result: TResult | null;
  lastError: string | null;
  onFailure: OnParentFailure;
}

/** The job a compensation undoes, as `job.compensating()` gives it. */
export interface CompensatedJob<TPayload = unknown, TResult = unknown> {
  id: string;
  ref: string | null;
  queue: string;
  payload: TPayload;
  result: TResult | null;
}

/** A flow that has ended, as the 'flow-finished' event carries it. */
export interface FinishedFlow {
  id: string;
  name: string | null;
  status: FlowStatus;
  reason: string | null;
}

/** A flow in a list (CLI, dashboard). */
export interface FlowSummary {
  id: string;
  name: string | null;
  status: FlowStatus;
  reason: string | null;
  createdAt: Date;
  finishedAt: Date | null;
  jobs: number;
}
