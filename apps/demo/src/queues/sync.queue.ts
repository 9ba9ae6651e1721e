import { defineQueue } from 'nestjs-pg-queue';
import { firstProblem, integerProblem, shown } from './payload-checks.js';

/** Payload of the `sync` queue: a record to push to a (pretend) CRM. */
export interface SyncPayload {
  recordId: number;
  /** The CRM refuses this record on every attempt: it ends in the dead letter (status failed). */
  corrupt?: boolean;
}

/** The `sync` queue, typed and validated (see emails.queue.ts). */
export const Sync = defineQueue<SyncPayload>('sync', {
  validate: (payload) =>
    firstProblem(payload, '{ recordId, corrupt? }', (p) => [
      integerProblem('recordId', p.recordId, 0, Number.MAX_SAFE_INTEGER),
      p.corrupt === undefined || typeof p.corrupt === 'boolean' ? undefined : `corrupt must be true or false, got ${shown(p.corrupt)}`,
    ]),
});
