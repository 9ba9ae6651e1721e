import { INT8_MAX } from '../utils/bigint-id.js';

/**
 * The types of a recorded event (the trigger of migration JobEvents1764730000000 writes them):
 * - `enqueued`: the job was inserted (by any path, SQL included), or a finished job was queued again (retry);
 * - `started`: its handler was called (a claim that starts it, or a worker marking a read-ahead job started);
 * - `completed`; `failed` (an attempt failed), then `retrying` (it is queued again) or `dead` (it was the last);
 * - `stalled`: the sweeper took the job back after its worker stopped renewing the lease (then `dead` when that
 *   was its last attempt, else it is queued again);
 * - `returned`: queued again without charging an attempt (snoozed, released at shutdown, given back unstarted);
 * - `cancelled`; `flow-finished`: a flow with a job in a recording queue ended (`detail`: its final status).
 */
export type QueueEventType = 'enqueued' | 'started' | 'completed' | 'failed' | 'retrying' | 'dead' | 'stalled' | 'returned' | 'cancelled' | 'flow-finished';

export const QUEUE_EVENT_TYPES: readonly QueueEventType[] = [
  'enqueued', 'started', 'completed', 'failed', 'retrying', 'dead', 'stalled', 'returned', 'cancelled', 'flow-finished',
];

/** One recorded event. */
export interface QueueEvent {
  /**
   * Its position, "<tx>-<seq>": pass the last one seen as `after` to resume after it. Positions handed to one
   * consumer strictly increase (compare them with compareEventIds); they are not the order events were inserted in.
   */
  readonly id: string;
  readonly type: QueueEventType;
  /** The job (null for flow-finished). */
  readonly jobId: string | null;
  /** The job's flow, or the flow that finished. */
  readonly flowId: string | null;
  readonly queue: string;
  /** The job's attempts at the change (null for flow-finished). */
  readonly attempt: number | null;
  /** failed, retrying, dead, stalled: the job's last error; flow-finished: the flow's final status. */
  readonly detail: string | null;
  /** When the change was written (the database clock: its transaction's start). */
  readonly at: Date;
}

export interface EventStreamOptions {
  /** Resume after this event id (a QueueEvent's `id`); '0-0': from the oldest event kept. Default: from now. */
  after?: string;
  /** Only events of these queues. Default: all recording queues. */
  queues?: readonly string[];
  /** Only events of these types. Default: all. */
  types?: readonly QueueEventType[];
  /** Events read per statement (1 to 1000). Default 100. The next page is read when the consumer asks for it. */
  pageSize?: number;
  /** The poll when no NOTIFY comes (LISTEN down, or an event held back by an older open transaction). Default 1000. */
  pollIntervalMs?: number;
  /** Ends the iteration (the pending next() resolves done). */
  signal?: AbortSignal;
}

const EVENT_ID = /^(\d{1,20})-(\d{1,19})$/;
const XID8_MAX = 18446744073709551615n;

/**
 * An event id as the stream writes it, "<tx>-<seq>" (QueueEvent.id), split into its place: undefined unless both
 * parts are within their columns' ranges (xid8, bigint), so a bad id is refused where it is given (events(),
 * the dashboard's cursor) rather than by the database's cast at every read.
 */
export function parseEventId(value: unknown): { tx: string; id: string } | undefined {
  const m = typeof value === 'string' ? EVENT_ID.exec(value) : null;
  if (!m || BigInt(m[1]) > XID8_MAX || BigInt(m[2]) > INT8_MAX) return undefined;
  return { tx: m[1], id: m[2] };
}

/** Orders two event ids: negative when a comes first. */
export function compareEventIds(a: string, b: string): number {
  const [ta, ia] = a.split('-').map(BigInt);
  const [tb, ib] = b.split('-').map(BigInt);
  if (ta !== tb) return ta < tb ? -1 : 1;
  return ia === ib ? 0 : ia < ib ? -1 : 1;
}
