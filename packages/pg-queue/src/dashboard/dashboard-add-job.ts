// The dashboard's "Add a job" form: its fields read into a queue, a payload and EnqueueOptions, which
// QueueService.enqueue (enqueueUnique with a unique key) checks again, a typed queue's validator included, before
// anything is stored. A field it cannot read answers 400 naming the field, before the confirmation.
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { EnqueueOptions } from '../interfaces/enqueue.interface.js';
import type { OnConflict } from '../store/job-store.types.js';
import { readIsoInstant } from '../utils/iso-instant.js';
import { field, type AnyRequest } from './dashboard-http.js';

/** The form's fields, carried through the confirmation page of a browser without JavaScript. */
export const ADD_JOB_FIELDS = ['queue', 'payload', 'priority', 'delaySeconds', 'runAt', 'uniqueKey', 'onConflict', 'maxAttempts', 'lifo'] as const;
export type AddJobField = (typeof ADD_JOB_FIELDS)[number];

/** What the form holds, as text (a prefilled form: a job to duplicate with changes). */
export type AddJobForm = Partial<Record<AddJobField, string>>;

export const ON_CONFLICT_MODES: readonly OnConflict[] = ['keep', 'replace', 'keep-run-at', 'queue-after'];

export interface AddJobInput {
  queue: string;
  payload: unknown;
  options: EnqueueOptions;
}

/** Reads the posted form; every field but the queue and the payload may be left empty (the queue's defaults). */
export function addJobOf(req: AnyRequest): AddJobInput {
  const text = (name: AddJobField) => (field(req, name) ?? '').trim();
  const queue = text('queue');
  if (queue === '') throw new PgQueueError('queue: give the queue the job goes to.');
  const payloadText = text('payload') || '{}';
  let payload: unknown;
  try {
    payload = JSON.parse(payloadText);
  } catch (error) {
    throw new PgQueueError(`payload: not JSON (${(error as Error).message}); e.g. {"to":"ada@example.com"}.`);
  }
  const integer = (name: AddJobField, min: number, max: number): number | undefined => {
    const value = text(name);
    if (value === '') return undefined;
    if (!/^-?\d{1,10}$/.test(value) || Number(value) < min || Number(value) > max) throw new PgQueueError(`${name}: expected a whole number from ${min} to ${max}, got ${JSON.stringify(value.slice(0, 40))}.`);
    return Number(value);
  };
  const options: EnqueueOptions = {};
  const priority = integer('priority', -2_147_483_647, 2_147_483_647);
  if (priority !== undefined) options.priority = priority;
  const maxAttempts = integer('maxAttempts', 1, 1_000);
  if (maxAttempts !== undefined) options.maxAttempts = maxAttempts;
  const delaySeconds = integer('delaySeconds', 0, 366 * 86_400);
  const runAtText = text('runAt');
  if (delaySeconds !== undefined && runAtText !== '') throw new PgQueueError('delaySeconds and runAt exclude each other: give one of them.');
  if (delaySeconds !== undefined) options.delayMs = delaySeconds * 1_000;
  if (runAtText !== '') {
    const read = readIsoInstant(runAtText);
    if ('noSuch' in read) throw new PgQueueError(`runAt: ${JSON.stringify(runAtText.slice(0, 40))} is not a date-time that exists (${read.noSuch}).`);
    if (!('date' in read)) throw new PgQueueError(`runAt: expected an ISO 8601 date-time, e.g. 2026-12-01T08:00:00Z (without an offset: the server's time zone); got ${JSON.stringify(runAtText.slice(0, 40))}.`);
    options.runAt = read.date;
  }
  const uniqueKey = text('uniqueKey');
  if (uniqueKey !== '') options.uniqueKey = uniqueKey;
  const onConflict = text('onConflict');
  if (onConflict !== '') {
    if (!(ON_CONFLICT_MODES as readonly string[]).includes(onConflict)) throw new PgQueueError(`onConflict: one of ${ON_CONFLICT_MODES.join(', ')}, got ${JSON.stringify(onConflict.slice(0, 40))}.`);
    if (uniqueKey === '') throw new PgQueueError('onConflict: only with a unique key (it says what a second job with the same key does).');
    options.onConflict = onConflict as OnConflict;
  }
  if (text('lifo') === '1') options.lifo = true;
  return { queue, payload, options };
}
