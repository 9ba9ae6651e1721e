import { PgQueueError } from '../errors/pg-queue.error.js';
import { INVALID_OPTION } from '../pg-queue.messages.js';
import { checkFairnessWeight } from './resolve-options.js';
import { checkJobKey } from './job-key.js';

/** setFairnessWeights' argument as pairs, every key and weight checked before anything is stored. */
export function checkedWeights(where: string, weights: unknown): Array<[string, number | null]> {
  if (weights === null || typeof weights !== 'object' || Array.isArray(weights)) {
    throw new PgQueueError(INVALID_OPTION(where, 'weights', weights, 'an object of key to weight (an integer from 1 to 1000, or null to remove)'));
  }
  const pairs = Object.entries(weights as Record<string, unknown>).map(([key, weight]): [string, number | null] => [
    checkJobKey(where, 'key', key),
    weight === null ? null : checkFairnessWeight(where, `weights[${JSON.stringify(key)}]`, weight),
  ]);
  if (pairs.length === 0) throw new PgQueueError(INVALID_OPTION(where, 'weights', weights, 'at least one key'));
  if (pairs.length > 10_000) throw new PgQueueError(INVALID_OPTION(where, 'weights', `${pairs.length} keys`, 'at most 10000 keys per call'));
  return pairs;
}
