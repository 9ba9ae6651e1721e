import { PgQueueError } from '../errors/pg-queue.error.js';
import type { MissedFires, ScheduleOptions } from '../interfaces/recurring-job.interface.js';
import { INVALID_SCHEDULE, describe } from '../pg-queue.messages.js';
import { QUEUE_NAME_PATTERN } from '../pg-queue.constants.js';
import type { ScheduleDefinition } from '../store/schedule.store.js';
import { serializePayload } from '../utils/serialize-payload.js';
import { assertTimeZone, parseCron, type MissedFiresPolicy } from './fire-times.js';

/** The longest missed-fire window (about ten years): a catch-up enqueues at most 1,000 fires anyway. */
const MAX_WINDOW_MS = 3_660 * 86_400_000;
const INT32_MAX = 2_147_483_647;

export interface ScheduleInput extends ScheduleOptions {
  name: unknown;
  queue: unknown;
  cron: unknown;
  maxAttempts?: number | null;
}

/**
 * Validates a schedule (from @RecurringJob at boot, or upsertSchedule at runtime) into what the store writes.
 * `where` names the method or the call in every error; nothing is stored when this throws.
 */
export function resolveSchedule(where: string, input: ScheduleInput, maxPayloadBytes: number): ScheduleDefinition {
  const bad = (detail: string) => new PgQueueError(INVALID_SCHEDULE(where, detail));
  const { name, queue, cron } = input;
  if (typeof name !== 'string' || !QUEUE_NAME_PATTERN.test(name)) throw bad(`invalid schedule name ${describe(name)}: use 1 to 128 characters from A-Z a-z 0-9 _ . : -`);
  if (typeof queue !== 'string' || !QUEUE_NAME_PATTERN.test(queue)) throw bad(`invalid queue name ${describe(queue)}: use 1 to 128 characters from A-Z a-z 0-9 _ . : -`);
  const timeZone = input.timeZone ?? 'UTC';
  if (typeof timeZone !== 'string' || timeZone.length === 0) throw bad(`invalid timeZone ${describe(timeZone)}: expected an IANA time zone such as "Europe/Berlin"`);
  try {
    assertTimeZone(timeZone);
  } catch {
    throw bad(`unknown timeZone ${describe(timeZone)}: expected an IANA time zone such as "Europe/Berlin"`);
  }
  if (typeof cron !== 'string' || cron.trim().length === 0 || cron.length > 256) {
    throw bad(`invalid cron ${describe(cron)}: expected a cron expression such as "*/5 * * * *" (5 fields, or 6 with seconds first)`);
  }
  try {
    parseCron(cron, timeZone, Date.now()).next(); // also refuses expressions that never fire (e.g. 30 February)
  } catch (error) {
    throw bad(`invalid cron ${describe(cron)}: ${error instanceof Error ? error.message : String(error)}`);
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
  const priority = input.priority ?? 0;
  if (!Number.isInteger(priority) || Math.abs(priority) > INT32_MAX) throw bad(`invalid priority ${describe(priority)}: expected an integer (32-bit)`);
  const maxAttempts = input.maxAttempts ?? null;
  if (maxAttempts !== null && (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 1_000)) {
    throw bad(`invalid maxAttempts ${describe(maxAttempts)}: expected an integer from 1 to 1000`);
  }
  return { name, queue, cron: cron.trim(), timeZone, payloadJson, missed: resolveMissedFires(input.missedFires, bad), priority, maxAttempts };
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
