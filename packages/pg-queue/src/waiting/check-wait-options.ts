import { PgQueueError } from '../errors/pg-queue.error.js';
import { INVALID_OPTION } from '../pg-queue.messages.js';
import type { WaitOptions } from './job-waiters.js';

/**
 * The options of waitFor and waitForFlow, checked before any wait starts: an object, `timeoutMs` an integer a timer
 * can hold, `signal` an AbortSignal. `call` names the call in the error ("waitFor(12)").
 */
export function checkWaitOptions(call: string, options: WaitOptions): WaitOptions {
  if (options === null || typeof options !== 'object') throw new PgQueueError(`${call} options must be an object { timeoutMs?, signal? }.`);
  const { timeoutMs, signal } = options;
  if (timeoutMs !== undefined && (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 2_147_483_647)) {
    throw new PgQueueError(INVALID_OPTION(call, 'timeoutMs', timeoutMs, 'an integer from 1 to 2147483647'));
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new PgQueueError(INVALID_OPTION(call, 'signal', signal, 'an AbortSignal'));
  return { timeoutMs, signal };
}
