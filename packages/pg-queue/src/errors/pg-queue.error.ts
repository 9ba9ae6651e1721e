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
