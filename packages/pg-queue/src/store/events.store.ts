import type { Pool } from 'pg';
import type { QueueEvent, QueueEventType } from '../events/queue-event.interface.js';
import { EVENTS_SQL } from './events.sql.js';
import { Statements } from './statements.js';

/** A reader's position: the last (tx, id) handed out or passed over. */
export interface EventPosition {
  tx: string;
  id: string;
}

interface EventRow {
  id: string;
  tx: string;
  type: QueueEventType;
  job_id: string | null;
  flow_id: string | null;
  queue_name: string;
  attempt: number | null;
  detail: string | null;
  created_at: Date;
  matched: boolean;
}

/** One page: the events that pass the filters, and the position after every row read (matched or not). */
export interface EventPage {
  events: QueueEvent[];
  /** Rows read (a full page means more may follow at once). */
  read: number;
  last: EventPosition | undefined;
}

/** The event stream's table access (events.sql.ts), on the queue's own pool. */
export class EventStore {
  private readonly statements: Statements<typeof EVENTS_SQL>;

  constructor(pool: Pool, options: { transactionPooler?: boolean } = {}) {
    this.statements = new Statements(pool, EVENTS_SQL, 'pgq_events_', options);
  }

  async readPage(after: EventPosition, filters: { queues?: readonly string[]; types?: readonly string[] }, limit: number): Promise<EventPage> {
    const rows = await this.statements.rows<EventRow>('readPage', [after.tx, after.id, filters.queues ?? null, filters.types ?? null, limit]);
    const events = rows.filter((r) => r.matched).map((r) => ({
      id: `${r.tx}-${r.id}`, type: r.type, jobId: r.job_id, flowId: r.flow_id, queue: r.queue_name, attempt: r.attempt, detail: r.detail, at: r.created_at,
    }));
    const lastRow = rows.at(-1);
    return { events, read: rows.length, last: lastRow && { tx: lastRow.tx, id: lastRow.id } };
  }

  /** The position "now": past it come only events of transactions not yet ended. */
  async head(): Promise<EventPosition> {
    const [row] = await this.statements.rows<{ tx: string }>('head', []);
    return { tx: row.tx, id: '0' };
  }

  /** The queue starts (true) or stops recording events; returns the recording queues after the change. */
  async record(queue: string, on: boolean): Promise<string[]> {
    const [row] = await this.statements.rows<{ queues: string[] }>('record', [queue, on]);
    return row.queues;
  }

  async recordingQueues(): Promise<string[]> {
    return (await this.statements.rows<{ queue_name: string }>('recordingQueues', [])).map((r) => r.queue_name);
  }

  /** One batch of events older than retentionMs deleted; how many. */
  async deleteBefore(retentionMs: number, limit: number): Promise<number> {
    return (await this.statements.result('deleteBefore', [retentionMs, limit])).rowCount ?? 0;
  }
}
