import type { PoolClient, QueryResultRow } from 'pg';
import type { QueueEventType } from '../events/queue-event.interface.js';
import { DASHBOARD_EVENTS_SQL } from './dashboard-events.sql.js';
import type { EventPosition } from './events.store.js';

/** Events one page of the events list looks at, at most (then it offers to go on from where it stopped). */
export const EVENT_SCAN_WINDOW = 10_000;
/** A job page shows at most this many of the job's events. */
export const JOB_EVENTS_SHOWN = 200;

/** An event as the dashboard shows it; `id` is the stream's "<tx>-<seq>" (QueueEvent.id). */
export interface EventListRow {
  id: string;
  type: QueueEventType;
  job_id: string | null;
  flow_id: string | null;
  queue_name: string;
  attempt: number | null;
  /** A failure's last error (null with hidePayloads), or a flow's final status. */
  detail: string | null;
  created_at: Date;
}

/** A position in the table's (tx, id) order, as the stream's ids write it (the stream reader's EventPosition). */
export type EventCursor = EventPosition;

export interface EventListQuery {
  queue: string | null;
  type: QueueEventType | null;
  /** Older than this event (a newest-first page), or newer than it; neither: the newest. */
  before: EventCursor | null;
  after: EventCursor | null;
  limit: number;
  withDetail: boolean;
}

/** A page of events in the order read (newest first, or oldest first for `after`), and where the scan window ended when it matched less than a page. */
export interface EventListRead {
  rows: EventListRow[];
  /** The window's last row when the window was full and matched less than a page: the next page goes on from it; null: the table ends there, or the page is full. */
  windowEnd: EventCursor | null;
}

type Row = EventListRow & { tx: string };

/** The dashboard's reads of background_job_events (dashboard-events.sql.ts), on a request's connection. */
export class DashboardEventQueries {
  constructor(private readonly client: PoolClient) {}

  private async run<R extends QueryResultRow>(name: keyof typeof DASHBOARD_EVENTS_SQL, values: unknown[]): Promise<R[]> {
    return (await this.client.query<R>({ text: DASHBOARD_EVENTS_SQL[name], values })).rows;
  }

  /** Whether the JobEvents migration has run. */
  async installed(): Promise<boolean> {
    return (await this.run<{ installed: boolean }>('installed', []))[0].installed;
  }

  async recordingQueues(): Promise<string[]> {
    return (await this.run<{ queue_name: string }>('recordingQueues', [])).map((r) => r.queue_name);
  }

  async list(q: EventListQuery): Promise<EventListRead> {
    const cursor = q.after ?? q.before;
    const statement = q.after ? 'newer' : q.before ? 'older' : 'newest';
    const values: unknown[] = [q.queue, q.type, q.limit, EVENT_SCAN_WINDOW, q.withDetail];
    if (cursor) values.push(cursor.tx, cursor.id);
    const rows = (await this.run<Row>(statement, values)).map(shown);
    if (rows.length === q.limit) return { rows, windowEnd: null };
    const [end] = await this.run<EventCursor>(q.after ? 'windowEndNewer' : 'windowEndOlder', [cursor?.tx ?? null, cursor?.id ?? null, EVENT_SCAN_WINDOW]);
    return { rows, windowEnd: end ?? null };
  }

  /** The job's events, oldest first, among those recorded from its creation and the newest (see the SQL); `partial`: events in between may be missing. */
  async jobEvents(jobId: string, createdAt: Date | string, withDetail: boolean): Promise<{ rows: EventListRow[]; partial: boolean }> {
    // A second before the job's creation: its 'enqueued' event is written at its insert's now(), as created_at is.
    const from = new Date(new Date(createdAt).getTime() - 1_000);
    const rows = (await this.run<Row>('jobEvents', [jobId, from, EVENT_SCAN_WINDOW, withDetail, JOB_EVENTS_SHOWN])).map(shown);
    const [{ busy }] = await this.run<{ busy: boolean }>('busySince', [from, EVENT_SCAN_WINDOW]);
    return { rows, partial: busy };
  }
}

/** The row with its id written as the stream writes it ("<tx>-<seq>"). */
function shown(r: Row): EventListRow {
  const { tx, ...rest } = r;
  return { ...rest, id: `${tx}-${r.id}` };
}
