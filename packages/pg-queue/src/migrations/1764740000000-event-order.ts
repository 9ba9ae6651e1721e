import type { MigrationInterface, QueryRunner } from 'typeorm';
import { flowEventFunction, jobEventFunction, type EventTx } from './1764730000000-job-events.js';

/**
 * An event's `tx` (its place in the stream) is the newest xid assigned when it is written, no longer the writing
 * transaction's own: `greatest(own xid, snapshot xmax - 1)`.
 *
 * Why: a job's events must reach a consumer in the order of the job's changes. With the writer's own xid they did
 * not when a transaction took its xid, another then changed the job and committed, and the first changed the job
 * after it (it waited for the row, or came to it later): the later change got the smaller xid and was handed out
 * first. Seen by the simulation (seed 63): a flow's failure took its xid on the flow's row, a snoozed step of it
 * went back to queued (`returned`), then the failure cancelled that step (`cancelled`), and the stream gave
 * cancelled before returned, so a consumer kept "returned" as the job's last state.
 *
 * With the newest xid at the time of writing: a change of a row is written after the previous change of it has
 * committed (the row lock), so its snapshot's xmax, and with it `tx`, is at least the previous one's, and its
 * serial is larger. The stream's rule still holds: `tx` is never below the writer's own xid, so a reader that hands
 * out only `tx` below its snapshot's xmin never hands out a position an open transaction can still write below.
 * The price: an event now waits for the transactions that were open when it was written (before, for those older
 * than its transaction), which is the same kind of wait. xmax - 1, not xmax: with nothing open, a reader's xmin is
 * its xmax, which the next xid to be assigned equals, so an event at xmax would wait for a transaction that may
 * never come.
 */
export const EVENT_TX: EventTx = {
  declare: `event_tx xid8 := greatest(pg_current_xact_id(), (pg_snapshot_xmax(pg_current_snapshot())::text::int8 - 1)::text::xid8);`,
};

export class EventOrder1764740000000 implements MigrationInterface {
  name = 'EventOrder1764740000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(jobEventFunction(EVENT_TX));
    await q.query(flowEventFunction(EVENT_TX));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(jobEventFunction());
    await q.query(flowEventFunction());
  }
}
