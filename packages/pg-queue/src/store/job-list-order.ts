import { PgQueueError } from '../errors/pg-queue.error.js';

/**
 * The order of the operator's job lists, one definition for `pg-queue jobs list` and the dashboard's Jobs page:
 * newest first (the highest id, the latest enqueued, on top), as Oban Web and River UI list jobs, so that what an
 * operator just enqueued or just saw fail is on the first page. Oldest first on request (`--oldest-first`,
 * `?order=oldest`), for walking a backlog from its start.
 */
export type JobListOrder = 'newest' | 'oldest';

export const JOB_LIST_ORDERS: readonly JobListOrder[] = ['newest', 'oldest'];
export const DEFAULT_JOB_LIST_ORDER: JobListOrder = 'newest';

/** The order a request names (null or empty: the default); anything else is refused with the orders there are. */
export function jobListOrderOf(value: string | null | undefined): JobListOrder {
  if (value === null || value === undefined || value === '') return DEFAULT_JOB_LIST_ORDER;
  if ((JOB_LIST_ORDERS as readonly string[]).includes(value)) return value as JobListOrder;
  throw new PgQueueError(`Unknown job list order ${JSON.stringify(value)}: one of ${JOB_LIST_ORDERS.join(', ')}.`);
}

/**
 * The keyset test and ORDER BY of a page of a job list on alias j, after the cursor `$n` (the last id of the page
 * before; NULL: the first page) in the given order.
 */
export function jobListKeyset(order: JobListOrder, cursor: string): { after: string; orderBy: string } {
  return order === 'oldest'
    ? { after: `(${cursor}::int8 IS NULL OR j.id > ${cursor}::int8)`, orderBy: 'j.id' }
    : { after: `(${cursor}::int8 IS NULL OR j.id < ${cursor}::int8)`, orderBy: 'j.id DESC' };
}
