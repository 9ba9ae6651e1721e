import type { BackoffFunction, ExponentialBackoff } from '../interfaces/job-handler-options.interface.js';

const DAY_MS = 86_400_000;

/** The seed's schedule, 10 s x 2^attempt, capped, with +/-25% jitter so a burst of failures spreads out. */
export function exponentialBackoff({ baseMs = 10_000, maxMs = DAY_MS, jitter = true }: ExponentialBackoff = {}): BackoffFunction {
  return (attempt) => {
    const raw = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 40));
    const delay = jitter ? raw * (0.75 + Math.random() * 0.5) : raw;
    return Math.round(Math.min(maxMs, delay));
  };
}
