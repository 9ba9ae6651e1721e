import { PgQueueError } from '../errors/pg-queue.error.js';
import { requestUrl, type AnyRequest } from './dashboard-http.js';
import { LISTED_STATUSES, type ListedStatus } from './views/overview.view.js';
import { jobListOrderOf, type JobListOrder } from '../store/job-list-order.js';
import { FLOW_STATUSES, type FlowStatus } from '../flows/flow.interfaces.js';
import { QUEUE_EVENT_TYPES, parseEventId, type QueueEventType } from '../events/queue-event.interface.js';
import type { EventCursor } from '../store/dashboard-events.store.js';
import { isBigintId } from '../utils/bigint-id.js';

// What the dashboard's routes read from a request (ids, filters, path segments), checked: bad input is a
// PgQueueError, which the controller answers with a 400.

/** The most jobs one action on a selection takes (a page of the list holds at most 500). */
export const SELECTION_MAX = 500;

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

/** The jobs list's query: its filter, and its page (newest first by `before`, oldest first by `after`). */
export function jobsQueryOf(req: AnyRequest): {
  filter: { queue: string | null; status: ListedStatus | null; search: string | null; text: string | null };
  before: string | null;
  order: JobListOrder;
  after: string | null;
} {
  const params = requestUrl(req).searchParams;
  const queue = params.get('queue')?.trim() || null;
  const status = listedStatus(params.get('status'));
  const search = params.get('q')?.trim().slice(0, 512) || null;
  const text = params.get('text')?.trim().slice(0, 512) || null;
  refuseNul('queue filter', queue);
  refuseNul('search', search);
  refuseNul('text search', text);
  const order = jobListOrderOf(params.get('order'));
  const id = (name: 'before' | 'after') => {
    const value = params.get(name) || null;
    if (value !== null && !isBigintId(value)) throw new PgQueueError(`"${name}" must be a job id, got ${JSON.stringify(value)}.`);
    return value;
  };
  const [before, after] = [id('before'), id('after')];
  if (order === 'oldest' && text) throw new PgQueueError('A payload or error search lists newest first: drop "oldest first", or the search.');
  return { filter: { queue, status, search, text }, before: order === 'oldest' ? null : before, order, after: order === 'oldest' ? after : null };
}

/** The flows list's query: a status filter, and the page (`before` a flow id). */
export function flowsQueryOf(req: AnyRequest): { status: FlowStatus | null; before: string | null } {
  const params = requestUrl(req).searchParams;
  const status = params.get('status') || null;
  if (status !== null && !FLOW_STATUSES.includes(status as FlowStatus)) throw new PgQueueError(`Unknown flow status ${JSON.stringify(status)}: one of ${FLOW_STATUSES.join(', ')}.`);
  const before = params.get('before') || null;
  if (before !== null && !isBigintId(before)) throw new PgQueueError(`"before" must be a flow id, got ${JSON.stringify(before)}.`);
  return { status: status as FlowStatus | null, before };
}

/** The add-job form's query: the job it copies (`from`), or the queue it starts with. */
export function newJobQueryOf(req: AnyRequest): { from: string | null; queue: string | undefined } {
  const params = requestUrl(req).searchParams;
  const from = params.get('from') || null;
  if (from !== null && !isBigintId(from)) throw new PgQueueError(`"from" must be a job id, got ${JSON.stringify(from)}.`);
  return { from, queue: params.get('queue') ?? undefined };
}

/** An event id as the stream writes it (parseEventId), or null when none is given. */
function eventCursorOf(name: string, value: string | null): EventCursor | null {
  if (value === null) return null;
  const cursor = parseEventId(value);
  if (!cursor) throw new PgQueueError(`"${name}" must be an event id "<tx>-<seq>", got ${JSON.stringify(value.slice(0, 60))}.`);
  return cursor;
}

/** The events list's query: its filters (a queue, a type), and its page (older than `before`, or newer than `after`). */
export function eventsQueryOf(req: AnyRequest): { queue: string | null; type: QueueEventType | null; before: EventCursor | null; after: EventCursor | null } {
  const params = requestUrl(req).searchParams;
  const queue = params.get('queue')?.trim() || null;
  refuseNul('queue filter', queue);
  const type = params.get('type') || null;
  if (type !== null && !QUEUE_EVENT_TYPES.includes(type as QueueEventType)) throw new PgQueueError(`Unknown event type ${JSON.stringify(type.slice(0, 60))}: one of ${QUEUE_EVENT_TYPES.join(', ')}.`);
  const before = eventCursorOf('before', params.get('before') || null);
  const after = eventCursorOf('after', params.get('after') || null);
  if (before && after) throw new PgQueueError('Give "before" (older events) or "after" (newer ones), not both.');
  return { queue, type: type as QueueEventType | null, before, after };
}
