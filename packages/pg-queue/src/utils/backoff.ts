import type { BackoffFunction, ExponentialBackoff } from '../interfaces/job-handler-options.interface.js';
import { BAD_RETRY_DELAY, MAX_RETRY_DELAY_MS, describe } from '../pg-queue.messages.js';
import { errorLine } from './error-text.js';

const DAY_MS = 86_400_000;

/** The seed's schedule, 10 s x 2^attempt, capped, with +/-25% jitter so a burst of failures spreads out. */
export function exponentialBackoff({ baseMs = 10_000, maxMs = DAY_MS, jitter = true }: ExponentialBackoff = {}): BackoffFunction {
  return (attempt) => {
    const raw = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 40));
    const delay = jitter ? raw * (0.75 + Math.random() * 0.5) : raw;
    return Math.round(Math.min(maxMs, delay));
  };
}

/**
 * The delay before a retry, from a user's backoff function, always a whole number of ms in
 * [0, MAX_RETRY_DELAY_MS]: Infinity or 1e300 once became run_at NULL and a refused outcome batch. `problem`
 * says what was wrong with the function's answer (it threw, or gave something that is not a usable delay).
 */
export function retryDelay(backoff: BackoffFunction, attempt: number, error: unknown, queue: string): { delayMs: number; problem?: string } {
  let value: unknown;
  try {
    value = backoff(attempt, error);
  } catch (thrown) {
    return { delayMs: 0, problem: BAD_RETRY_DELAY(queue, `threw (${errorLine(thrown)})`, 0) };
  }
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= MAX_RETRY_DELAY_MS) return { delayMs: Math.round(value) };
  const delayMs = typeof value !== 'number' || Number.isNaN(value) || value < 0 ? 0 : MAX_RETRY_DELAY_MS;
  return { delayMs, problem: BAD_RETRY_DELAY(queue, `returned ${typeof value === 'number' ? String(value) : describe(value)}`, delayMs) };
}

/** A snooze's delay, clamped like a retry delay to a whole number of ms in [0, MAX_RETRY_DELAY_MS]; `clamped` when it had to be. */
export function snoozeDelay(value: unknown): { delayMs: number; clamped: boolean } {
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= MAX_RETRY_DELAY_MS) return { delayMs: Math.round(value), clamped: false };
  return { delayMs: typeof value !== 'number' || Number.isNaN(value) || value < 0 ? 0 : MAX_RETRY_DELAY_MS, clamped: true };
}
