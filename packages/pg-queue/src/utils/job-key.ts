import { PgQueueError } from '../errors/pg-queue.error.js';
import { INVALID_OPTION } from '../pg-queue.messages.js';
import { hasLoneSurrogate } from './serialize-payload.js';

/** The longest key a job's concurrency_key takes (the per-key limits' and fair share's key). */
const MAX_JOB_KEY_LENGTH = 512;

/**
 * A job's key (`concurrencyKey`, the key `fairness.key` returns, a key of fairness weights), or a clear error naming
 * `name`: a non-empty string of at most 512 characters that PostgreSQL's text stores as given (no NUL, no lone
 * surrogate). One check, so that every way a key arrives refuses the same keys with the same words.
 */
export function checkJobKey(where: string, name: string, key: unknown): string {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_JOB_KEY_LENGTH || key.includes('\0') || hasLoneSurrogate(key)) {
    throw new PgQueueError(INVALID_OPTION(where, name, key, `a non-empty string of at most ${MAX_JOB_KEY_LENGTH} characters, without NUL or a lone UTF-16 surrogate`));
  }
  return key;
}
