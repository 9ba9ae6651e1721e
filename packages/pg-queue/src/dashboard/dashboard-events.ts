// The dashboard's reads of the event stream (issue 43): the events page's data from a request's query, and one job's
// events for its page. Reads only: recording is turned on and off through QueueService.recordEvents.
import { compareEventIds, type QueueEventType } from '../events/queue-event.interface.js';
import type { DashboardQueries } from '../store/dashboard.store.js';
import { EVENT_SCAN_WINDOW, type EventCursor, type EventListRow } from '../store/dashboard-events.store.js';
import type { JobEventsData } from './views/event-rows.view.js';
import type { EventsData } from './views/events.view.js';

export interface EventsQuery {
  queue: string | null;
  type: QueueEventType | null;
  before: EventCursor | null;
  after: EventCursor | null;
}

const idOf = (c: EventCursor) => `${c.tx}-${c.id}`;

/**
 * One page of events, newest first, and its links: Older goes on below the oldest row shown (or below the end of the
 * scan window when a filter matched less than a page in it), Newer above the newest shown.
 */
export async function eventsPage(q: DashboardQueries, query: EventsQuery, pageSize: number, withDetail: boolean): Promise<EventsData> {
  const { queue, type, before, after } = query;
  const base = { queue, type, window: EVENT_SCAN_WINDOW };
  if (!(await q.events.installed())) return { ...base, installed: false, recording: [], rows: [], newer: null, older: null };
  const recording = await q.events.recordingQueues();
  const { rows, windowEnd } = await q.events.list({ queue, type, before, after, limit: pageSize, withDetail });
  const full = rows.length === pageSize;
  // Read upwards for a Newer page; shown newest first all the same (event ids order as the table's (tx, id)).
  const shown = after ? [...rows].sort((a, b) => compareEventIds(b.id, a.id)) : rows;
  const goOn = (last: EventListRow | undefined) => (full && last ? last.id : windowEnd ? idOf(windowEnd) : null);
  if (after) return { ...base, installed: true, recording, rows: shown, newer: goOn(rows.at(-1)), older: shown.at(-1)?.id ?? idOf(after) };
  return { ...base, installed: true, recording, rows: shown, older: goOn(rows.at(-1)), newer: before ? (shown[0]?.id ?? idOf(before)) : null };
}

/** The job's events when its queue records them (none read otherwise: the page says how to turn recording on); null without the table. */
export async function jobEvents(q: DashboardQueries, row: Record<string, unknown>, withDetail: boolean): Promise<JobEventsData | null> {
  if (!(await q.events.installed())) return null;
  const recording = (await q.events.recordingQueues()).includes(String(row.queue_name));
  if (!recording) return { recording, rows: [], partial: false };
  const { rows, partial } = await q.events.jobEvents(String(row.id), row.created_at as string, withDetail);
  return { recording, rows, partial };
}
