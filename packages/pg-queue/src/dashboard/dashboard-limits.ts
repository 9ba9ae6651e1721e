// The dashboard's form that changes a queue's limits at runtime: its fields read into a QueueLimitsChange (which
// QueueService.setQueueLimits checks again before anything is stored).
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { QueueLimitsChange } from '../limits/queue-limits.js';
import { field, type AnyRequest } from './dashboard-http.js';

/** The form's fields, carried through the confirmation page of a browser without JavaScript. */
export const LIMIT_FIELDS = ['concurrency', 'global', 'rate', 'perKey'] as const;

/** The change the form asks: an empty field is the decorator's value (null), `none` no limit, else a number (a rate: max/intervalMs). */
export function limitsChangeOf(req: AnyRequest): QueueLimitsChange {
  const read = (name: (typeof LIMIT_FIELDS)[number]): number | 'none' | null => {
    const text = (field(req, name) ?? '').trim();
    if (text === '') return null;
    if (text === 'none') return 'none';
    if (!/^\d{1,9}$/.test(text)) throw new PgQueueError(`${name}: expected a whole number, none, or nothing (the decorator's); got ${JSON.stringify(text.slice(0, 40))}.`);
    return Number(text);
  };
  const rateText = (field(req, 'rate') ?? '').trim();
  let rateLimit: QueueLimitsChange['rateLimit'] = null;
  if (rateText === 'none') rateLimit = 'none';
  else if (rateText !== '') {
    const m = /^(\d{1,9})\/(\d{1,9})$/.exec(rateText);
    if (!m) throw new PgQueueError(`rate: expected max/intervalMs (e.g. 100/1000), none, or nothing (the decorator's); got ${JSON.stringify(rateText.slice(0, 40))}.`);
    rateLimit = { max: Number(m[1]), intervalMs: Number(m[2]) };
  }
  const concurrency = read('concurrency');
  if (concurrency === 'none') throw new PgQueueError(`concurrency: 'none' is not allowed (each process runs at most that many jobs); give a number, or nothing for the decorator's.`);
  return { concurrency, globalConcurrency: read('global'), rateLimit, concurrencyPerKey: read('perKey') };
}
