import { PgQueueError } from '../errors/pg-queue.error.js';
import { requestUrl, type AnyRequest } from './dashboard-http.js';
import { LISTED_STATUSES, type ListedStatus } from './views/overview.view.js';

// What the dashboard's routes read from a request (ids, filters, path segments), checked: bad input is a
// PgQueueError, which the controller answers with a 400.

export const JOB_ID = /^[1-9][0-9]{0,18}$/;
const INT8_MAX = 9223372036854775807n;
/** The most jobs one action on a selection takes (a page of the list holds at most 500). */
export const SELECTION_MAX = 500;

/** A job id within bigint's range (19 digits pass JOB_ID up to 9999999999999999999; PostgreSQL then refuses it). */
export function isJobId(text: string): boolean {
  return JOB_ID.test(text) && BigInt(text) <= INT8_MAX;
}

/** Text PostgreSQL refuses in a text parameter ("invalid byte sequence"): a filter with it is bad input, not a 500. */
export function refuseNul(name: string, value: string | null): void {
  if (value?.includes('\0')) throw new PgQueueError(`The ${name} cannot contain the NUL character.`);
}

/** The status filter of the jobs list or of a bulk action: a job status, due or scheduled; null when not given. */
export function listedStatus(value: string | null | undefined): ListedStatus | null {
  if (!value) return null;
  if (!LISTED_STATUSES.includes(value as ListedStatus)) throw new PgQueueError(`Unknown status ${JSON.stringify(value)}: one of ${LISTED_STATUSES.join(', ')}.`);
  return value as ListedStatus;
}

export function lastSegments(req: AnyRequest, n: number): string[] {
  return requestUrl(req)
    .pathname.replace(/\/+$/, '')
    .split('/')
    .slice(-n)
    .map((s) => decodeURIComponent(s));
}

export function lastSegment(req: AnyRequest): string {
  return lastSegments(req, 1)[0];
}
