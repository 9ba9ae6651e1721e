/** Every error this library raises for bad input or bad configuration. */
export class PgQueueError extends Error {
  override name = 'PgQueueError';
}

/** Aborts `job.signal` and fails the attempt when a handler runs past its `timeoutMs`. */
export class JobTimeoutError extends Error {
  override name = 'JobTimeoutError';
  constructor(readonly timeoutMs: number) {
    super(`job timed out after ${timeoutMs} ms`);
  }
}

/** Aborts `job.signal` when this worker no longer owns the job (lease lost, or shutting down past the grace period). */
export class JobAbortedError extends Error {
  override name = 'JobAbortedError';
}

/**
 * Thrown by a handler to say "not now, run me again in `delayMs` ms" (an API answered 429, a resource is
 * busy): the job goes back to the queue without using up an attempt. A delay that is not a finite number of
 * ms from 0 to 365 days is clamped into that range (and logged), like a backoff's.
 */
export class JobSnoozedError extends Error {
  override name = 'JobSnoozedError';
  constructor(readonly delayMs: number) {
    super(`job snoozed for ${delayMs} ms`);
  }
}

/**
 * Thrown by a handler whose partner answered 429 ("too many requests", with or without Retry-After): the job goes
 * back to the queue without using up an attempt, and the queue (or, with `key`, its jobs of that concurrencyKey)
 * starts no job for `delayMs` ms in any process. 429s that come again without a success between grow the block
 * (doubling, up to the handler's `rateLimitedBackoff.maxMs`). A delay that is not a finite number of ms from 1 to
 * one day is clamped into that range (and logged). README, "Limits changed at runtime, and by the handler".
 */
export class RateLimitedError extends Error {
  override name = 'RateLimitedError';
  /** The concurrency key blocked; undefined: the whole queue. */
  readonly key: string | undefined;
  constructor(
    readonly delayMs: number,
    options: { key?: string } = {},
  ) {
    super(`rate limited by the partner for ${delayMs} ms${options.key === undefined ? '' : ` (key ${JSON.stringify(options.key)})`}`);
    this.key = options.key;
  }
}

/**
 * `QueueService.waitFor()` rejects with it when the job ended without completing: dead-lettered (`failed`,
 * with its last attempt's error) or `cancelled`.
 */
export class JobFailedError extends Error {
  override name = 'JobFailedError';
  constructor(
    readonly jobId: string,
    readonly status: 'failed' | 'cancelled',
    /** The job's `last_error`: what its last attempt threw (null for a job cancelled before it ran). */
    readonly lastError: string | null,
  ) {
    super(status === 'cancelled' ? `job ${jobId} was cancelled${lastError ? ` (last error: ${lastError})` : ''}` : `job ${jobId} failed: ${lastError ?? 'no error recorded'}`);
  }
}

/** `QueueService.waitFor()` rejects with it when `timeoutMs` passes first; the job itself is left alone. */
export class JobWaitTimeoutError extends Error {
  override name = 'JobWaitTimeoutError';
  constructor(
    readonly jobId: string,
    readonly timeoutMs: number,
    /** 'flow' for waitForFlow: jobId is then the flow's id. */
    what: 'job' | 'flow' = 'job',
  ) {
    super(`${what} ${jobId} did not finish within ${timeoutMs} ms (${what === 'job' ? 'waitFor' : 'waitForFlow'} timeoutMs); it keeps running`);
  }
}
