import { PgQueueError } from '../errors/pg-queue.error.js';
import type { MissedFires, ScheduleOptions } from '../interfaces/recurring-job.interface.js';
import { INVALID_SCHEDULE, describe } from '../pg-queue.messages.js';
import { QUEUE_NAME_PATTERN } from '../pg-queue.constants.js';
import type { ScheduleDefinition } from '../store/schedule.store.js';
import { readIsoInstant } from '../utils/iso-instant.js';
import { serializePayload } from '../utils/serialize-payload.js';
import { assertTimeZone, nextFireAfter, parseCron, type MissedFiresPolicy } from './fire-times.js';
import { unknownPlaceholder } from './payload-template.js';

/** The longest missed-fire window and the longest `every` (about ten years): a catch-up enqueues at most 1,000 fires anyway. */
const MAX_WINDOW_MS = 3_660 * 86_400_000;
const INT32_MAX = 2_147_483_647;
/** The shortest `every`: the tick's own cost (a scan and a transaction per fire) sets the floor; a cron with seconds goes to 1 s too. */
export const MIN_EVERY_MS = 1_000;
/** An ISO 8601 string given as startDate / endDate must say its offset: instances in other time zones would read another instant. */
const HAS_OFFSET = /(?:[Zz]|[+-]\d{2}(?::?\d{2})?)$/;

export interface ScheduleInput extends ScheduleOptions {
  name: unknown;
  queue: unknown;
  cron?: unknown;
  every?: unknown;
  maxAttempts?: number | null;
}

/**
 * Validates a schedule (from @RecurringJob at boot, or upsertSchedule at runtime) into what the store writes.
 * `where` names the method or the call in every error; nothing is stored when this throws.
 */
export function resolveSchedule(where: string, input: ScheduleInput, maxPayloadBytes: number): ScheduleDefinition {
  const bad = (detail: string) => new PgQueueError(INVALID_SCHEDULE(where, detail));
  const { name, queue, cron, every } = input;
  if (typeof name !== 'string' || !QUEUE_NAME_PATTERN.test(name)) throw bad(`invalid schedule name ${describe(name)}: use 1 to 128 characters from A-Z a-z 0-9 _ . : -`);
  if (typeof queue !== 'string' || !QUEUE_NAME_PATTERN.test(queue)) throw bad(`invalid queue name ${describe(queue)}: use 1 to 128 characters from A-Z a-z 0-9 _ . : -`);
  const timeZone = input.timeZone ?? 'UTC';
  if (typeof timeZone !== 'string' || timeZone.length === 0) throw bad(`invalid timeZone ${describe(timeZone)}: expected an IANA time zone such as "Europe/Berlin"`);
  try {
    assertTimeZone(timeZone);
  } catch {
    throw bad(`unknown timeZone ${describe(timeZone)}: expected an IANA time zone such as "Europe/Berlin"`);
  }
  if (cron !== undefined && every !== undefined) {
    throw bad(`both cron ${describe(cron)} and every ${describe(every)} given: a schedule fires on a cron expression or at a fixed interval, give one of them`);
  }
  if (cron === undefined && every === undefined) throw bad('neither cron nor every given: a schedule needs a cron expression (cron) or a fixed interval in milliseconds (every)');
  let everyMs: number | null = null;
  if (every !== undefined) {
    if (typeof every !== 'number' || !Number.isInteger(every) || every < MIN_EVERY_MS || every > MAX_WINDOW_MS) {
      throw bad(`invalid every ${describe(every)}: expected an integer number of milliseconds from ${MIN_EVERY_MS} (1 s) to ${MAX_WINDOW_MS}`);
    }
    everyMs = every;
  } else {
    if (typeof cron !== 'string' || cron.trim().length === 0 || cron.length > 256) {
      throw bad(`invalid cron ${describe(cron)}: expected a cron expression such as "*/5 * * * *" (5 fields, or 6 with seconds first)`);
    }
    try {
      parseCron(cron, timeZone, Date.now()).next(); // also refuses expressions that never fire (e.g. 30 February)
    } catch (error) {
      throw bad(`invalid cron ${describe(cron)}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  if (everyMs !== null && input.missedFires !== undefined) {
    throw bad(`missedFires ${describe(input.missedFires)} given with every: missed fires are a cron schedule's; an every schedule fires once when an instance is back, and its interval runs from that fire`);
  }
  const payload = input.payload ?? {};
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
    throw bad(`invalid payload ${describe(payload)}: expected a JSON object (each job gets it plus _schedule)`);
  }
  if ('_schedule' in payload) throw bad('payload has a key _schedule, which each fired job gets from the schedule: rename it');
  let payloadJson: string;
  try {
    payloadJson = serializePayload(queue, payload, maxPayloadBytes);
  } catch (error) {
    throw bad((error as Error).message);
  }
  const unknown = unknownPlaceholder(payload);
  if (unknown !== null) throw bad(`invalid payload template: ${unknown}`);
  const priority = input.priority ?? 0;
  if (!Number.isInteger(priority) || Math.abs(priority) > INT32_MAX) throw bad(`invalid priority ${describe(priority)}: expected an integer (32-bit)`);
  const maxAttempts = input.maxAttempts ?? null;
  if (maxAttempts !== null && (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 1_000)) {
    throw bad(`invalid maxAttempts ${describe(maxAttempts)}: expected an integer from 1 to 1000`);
  }
  const limit = input.limit ?? null;
  if (limit !== null && (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1)) {
    throw bad(`invalid limit ${describe(limit)}: expected a positive integer (the number of fires after which the schedule stops)`);
  }
  const startMs = instant('startDate', input.startDate, bad);
  const endMs = instant('endDate', input.endDate, bad);
  if (startMs !== null && endMs !== null && endMs <= startMs) {
    throw bad(`endDate ${new Date(endMs).toISOString()} is not after startDate ${new Date(startMs).toISOString()}: the schedule fires between the two`);
  }
  if (cron !== undefined && startMs !== null && endMs !== null && nextFireAfter(cron as string, timeZone, startMs - 1) > endMs) {
    throw bad(`cron ${describe(cron)} has no fire time between startDate ${new Date(startMs).toISOString()} and endDate ${new Date(endMs).toISOString()}: the schedule would never fire`);
  }
  return {
    name,
    queue,
    cron: everyMs === null ? (cron as string).trim() : null,
    everyMs,
    timeZone,
    payloadJson,
    missed: everyMs === null ? resolveMissedFires(input.missedFires, bad) : { policy: 'skip' },
    priority,
    maxAttempts,
    limit,
    startMs,
    endMs,
  };
}

function instant(option: 'startDate' | 'endDate', value: unknown, bad: (detail: string) => PgQueueError): number | null {
  if (value === undefined || value === null) return null;
  const expected = 'expected a Date or an ISO 8601 date-time with its offset, such as "2026-12-01T08:00:00Z" or "2026-12-01T09:00:00+01:00"';
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw bad(`invalid ${option}: an Invalid Date; ${expected}`);
    return value.getTime();
  }
  if (typeof value !== 'string') throw bad(`invalid ${option} ${describe(value)}: ${expected}`);
  const read = readIsoInstant(value);
  if ('noSuch' in read) throw bad(`invalid ${option} ${describe(value)}: no such date-time (${read.noSuch})`);
  if ('shape' in read || !HAS_OFFSET.test(value.trim()) || !/[Tt ]/.test(value.trim())) throw bad(`invalid ${option} ${describe(value)}: ${expected}`);
  return read.date.getTime();
}

function resolveMissedFires(value: MissedFires | undefined, bad: (detail: string) => PgQueueError): MissedFiresPolicy {
  if (value === undefined || value === 'skip') return { policy: 'skip' };
  if (value === 'latest') return { policy: 'latest' };
  const windowMs = (value as { windowMs?: unknown } | null)?.windowMs;
  if (typeof value === 'object' && value !== null && Object.keys(value).length === 1 && Number.isInteger(windowMs) && (windowMs as number) >= 1 && (windowMs as number) <= MAX_WINDOW_MS) {
    return { policy: 'window', windowMs: windowMs as number };
  }
  throw bad(`invalid missedFires ${describe(value)}: expected 'skip', 'latest' or { windowMs } with windowMs an integer from 1 to ${MAX_WINDOW_MS}`);
}
