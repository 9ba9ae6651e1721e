// The arguments of QueueService's calls by id and by schedule name, checked before any statement runs.
import { PgQueueError } from '../errors/pg-queue.error.js';
import { QUEUE_NAME_PATTERN } from '../pg-queue.constants.js';
import { isBigintId } from './bigint-id.js';

/** The options upsertSchedule knows. */
const SCHEDULE_SPEC_KEYS = new Set(['name', 'cron', 'every', 'queue', 'timeZone', 'payload', 'missedFires', 'priority', 'maxAttempts', 'limit', 'startDate', 'endDate']);

/** A schedule's name as the calls by name take it, or an error that shows it. */
export function scheduleName(name: unknown): string {
  if (typeof name !== 'string' || !QUEUE_NAME_PATTERN.test(name)) {
    throw new PgQueueError(`Invalid schedule name ${JSON.stringify(name)}: use 1 to 128 characters from A-Z a-z 0-9 _ . : -`);
  }
  return name;
}

/** A job's (or flow's) id as the calls by id take it: a positive bigint, as text. */
export function jobId(id: string | number | bigint, what = 'job'): string {
  const text = String(id);
  if (!isBigintId(text)) {
    throw new PgQueueError(`Invalid ${what} id ${JSON.stringify(text)}: expected a positive integer within bigint range.`);
  }
  return text;
}

/** upsertSchedule's argument: an object of known options (resolveSchedule checks their values). */
export function checkScheduleSpec(spec: unknown): void {
  if (spec === null || typeof spec !== 'object') throw new PgQueueError('upsertSchedule expects { name, queue, cron or every, ...options }.');
  const unknown = Object.keys(spec).filter((key) => !SCHEDULE_SPEC_KEYS.has(key));
  if (unknown.length > 0) throw new PgQueueError(`upsertSchedule(${JSON.stringify((spec as { name?: unknown }).name)}): unknown option "${unknown[0]}"; known options: ${[...SCHEDULE_SPEC_KEYS].join(', ')}.`);
}
