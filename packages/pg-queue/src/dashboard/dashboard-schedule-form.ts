// The dashboard's schedule edit form: its fields read into a ScheduleSpec for QueueService.upsertSchedule, the path
// of `pg-queue schedules set`, which checks it again (the cron, the zone, the dates, the payload's size) before
// anything is stored. A field it cannot read answers 400 naming the field, before the confirmation.
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { MissedFires, ScheduleInfo, ScheduleSpec } from '../interfaces/recurring-job.interface.js';
import { readIsoInstant } from '../utils/iso-instant.js';
import { field, type AnyRequest } from './dashboard-http.js';

/** The form's fields, carried through the confirmation page of a browser without JavaScript ('queue' is carried already). */
export const SCHEDULE_FIELDS = ['cron', 'everySeconds', 'timeZone', 'payload', 'limit', 'startDate', 'endDate', 'priority', 'maxAttempts', 'missedFires', 'paused'] as const;
type ScheduleField = (typeof SCHEDULE_FIELDS)[number] | 'queue';

/** What the form holds, as text. */
export type ScheduleForm = Partial<Record<ScheduleField, string>>;

/** The change the form asks: the schedule's new definition, and whether it is paused after it. */
export interface ScheduleEdit {
  spec: ScheduleSpec;
  paused: boolean;
}

/** The form filled from the schedule as stored. */
export function scheduleFormOf(s: ScheduleInfo): ScheduleForm {
  const missed = typeof s.missedFires === 'object' ? `${Math.round(s.missedFires.windowMs / 1_000)}` : s.missedFires;
  return {
    queue: s.queue,
    cron: s.cron ?? '',
    everySeconds: s.every === null ? '' : String(s.every / 1_000),
    timeZone: s.timeZone,
    payload: JSON.stringify(s.payload, null, 2),
    limit: s.limit === null ? '' : String(s.limit),
    startDate: s.startDate?.toISOString() ?? '',
    endDate: s.endDate?.toISOString() ?? '',
    priority: String(s.priority),
    maxAttempts: s.maxAttempts === null ? '' : String(s.maxAttempts),
    missedFires: missed,
    paused: s.paused ? '1' : '',
  };
}

/** Reads the posted form; an empty field takes upsertSchedule's default, as an option left out of `schedules set` does. */
export function scheduleEditOf(name: string, req: AnyRequest): ScheduleEdit {
  const text = (key: ScheduleField) => (field(req, key) ?? '').trim();
  const queue = text('queue');
  if (queue === '') throw new PgQueueError('queue: give the queue the schedule fires into.');
  const cron = text('cron');
  const everyText = text('everySeconds');
  if (cron !== '' && everyText !== '') throw new PgQueueError('cron and every exclude each other: a schedule fires on a cron expression or at a fixed interval.');
  if (cron === '' && everyText === '') throw new PgQueueError('give a cron expression or an interval (every, in seconds).');
  const integer = (key: ScheduleField, min: number, max: number): number | undefined => {
    const value = text(key);
    if (value === '') return undefined;
    if (!/^-?\d{1,16}$/.test(value) || Number(value) < min || Number(value) > max) throw new PgQueueError(`${key}: expected a whole number from ${min} to ${max}, got ${JSON.stringify(value.slice(0, 40))}.`);
    return Number(value);
  };
  const instant = (key: ScheduleField): Date | undefined => {
    const value = text(key);
    if (value === '') return undefined;
    const read = readIsoInstant(value);
    if ('date' in read) return read.date;
    if ('noSuch' in read) throw new PgQueueError(`${key}: ${JSON.stringify(value.slice(0, 40))} is not a date-time that exists (${read.noSuch}).`);
    throw new PgQueueError(`${key}: expected an ISO 8601 date-time, e.g. 2026-12-01T08:00:00Z (without an offset: the server's time zone); got ${JSON.stringify(value.slice(0, 40))}.`);
  };
  let payload: Record<string, unknown> | undefined;
  if (text('payload') !== '') {
    try {
      payload = JSON.parse(text('payload')) as Record<string, unknown>;
    } catch (error) {
      throw new PgQueueError(`payload: not JSON (${(error as Error).message}); a JSON object, e.g. {"report":"daily"}.`);
    }
  }
  const missedText = text('missedFires');
  let missedFires: MissedFires | undefined;
  // 'skip' is the default: left out, so that a cron schedule's form (filled with it) can become an every schedule,
  // which takes no missedFires.
  if (missedText === 'latest') missedFires = missedText;
  else if (missedText === 'skip') missedFires = undefined;
  else if (missedText !== '') missedFires = { windowMs: (integer('missedFires', 1, 366 * 86_400) ?? 0) * 1_000 };
  const limit = integer('limit', 1, Number.MAX_SAFE_INTEGER);
  const startDate = instant('startDate');
  const endDate = instant('endDate');
  const priority = integer('priority', -2_147_483_647, 2_147_483_647);
  const maxAttempts = integer('maxAttempts', 1, 1_000);
  const base = {
    name,
    queue,
    ...(payload !== undefined && { payload }),
    ...(text('timeZone') !== '' && { timeZone: text('timeZone') }),
    ...(limit !== undefined && { limit }),
    ...(startDate !== undefined && { startDate }),
    ...(endDate !== undefined && { endDate }),
    ...(priority !== undefined && { priority }),
    ...(maxAttempts !== undefined && { maxAttempts }),
    ...(missedFires !== undefined && { missedFires }),
  };
  // upsertSchedule checks the interval's bounds; the form only reads seconds (to the millisecond).
  if (everyText !== '' && !/^\d{1,9}(\.\d{1,3})?$/.test(everyText)) throw new PgQueueError(`every: expected seconds, e.g. 30 or 1.5, got ${JSON.stringify(everyText.slice(0, 40))}.`);
  const spec: ScheduleSpec = everyText !== '' ? { ...base, every: Math.round(Number(everyText) * 1_000) } : { ...base, cron };
  return { spec, paused: text('paused') === '1' };
}
