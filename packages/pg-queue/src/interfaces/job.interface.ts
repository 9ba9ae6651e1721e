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
}

export type JobStatus = 'queued' | 'processing' | 'completed' | 'failed' | 'cancelled';

/** A row of background_jobs, as `QueueService.get` returns it. */
export interface JobRecord<TPayload = unknown> {
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
}

/** Job counts of one queue by status. */
export type QueueCounts = Record<JobStatus, number> & {
  /** Present only when some counts are estimates (more than 10,000 jobs of that status): those statuses. */
  approximate?: JobStatus[];
};

/** Per-queue job counts by status. */
export type QueueStats = Record<string, QueueCounts>;
