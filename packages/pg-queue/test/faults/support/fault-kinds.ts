// Shared by the suite and the worker processes (which import nothing else of the suite).

/** Payloads of the `faults` queue (scenario 4): how the handler misbehaves. */
export type FaultKind =
  | 'ok' // a good job
  | 'throw-string' | 'throw-null' | 'throw-number' | 'reject-circular' | 'throw-sync' // junk thrown
  // Junk that once crashed the worker's process (issue 17, item 9): Errors whose text cannot be read the usual
  // way, thenables returned as they are (the handler is not async for these), a revoked Proxy, a Symbol.
  | 'stack-not-string' | 'name-symbol' | 'throw-revoked' | 'throw-symbol'
  | 'then-throws' | 'then-getter-throws' | 'then-both' | 'then-rejects-revoked'
  | 'result-revoked' // returns a result whose toJSON throws a revoked Proxy: refused, the job fails for good
  | 'hang' // never settles and ignores its signal
  | 'abortable' // runs past the timeout, but honours the signal
  | 'slow-once'; // ignores the signal and returns late on attempt 1, quick on later attempts

/**
 * The `faults` queue's timeoutMs: far above what a good job takes (an insert and 10 ms), even on a loaded
 * machine, so that only the bad ones time out.
 */
export const FAULTS_TIMEOUT_MS = 1_000;

/** The `faults` queue's maxAttempts. */
export const FAULTS_MAX_ATTEMPTS = 3;
