import type { MigrationInterface, QueryRunner } from 'typeorm';
import { jobEventFunction, type NestedOrder } from './1764730000000-job-events.js';
import { EVENT_TX } from './1764740000000-event-order.js';

/**
 * A job's events stay in the order of its changes when a statement run inside the one that changed it changed it
 * again.
 *
 * Why: AFTER ROW triggers fire when their statement ends, and a statement's final SELECT can run others first: the
 * flow step (stepFlows) and the successor step (stepSuccessors) are functions called there, after the statement's own
 * writes, and their statements' triggers fire when each of them ends. So when a failure batch retried job B
 * (`failed`, `retrying`) and, in the same statement, the failure of job A failed their flow, which cancelled B
 * (`cancelled`), the cancel's event was written first and the stream ended with `retrying` for a cancelled job. Seen
 * by the simulation (seed 981738550; CI, 2026-12-07).
 *
 * The fix, in the trigger of the outer change: when the job's row no longer holds the change being recorded (its
 * status or buffered flag moved on), the later change was made inside this statement, after it, and its events are
 * already written: those of this job written by this transaction at a later command than the row's current version
 * (`cmin`; the version a statement run inside made). They move after the outer change's events: a new serial and
 * the outer change's `tx`. Only this transaction's own rows move, which nobody else can have read. A job whose
 * row still holds the change (nearly every event) pays one primary-key probe of background_jobs.
 */
export const NESTED_ORDER: NestedOrder = {
  declare: `since int8;
    later bigint[] := '{}';
    moved bigint;`,
  before: `    IF TG_OP = 'UPDATE' THEN
      SELECT j.cmin::text::int8 INTO since FROM background_jobs AS j
      WHERE j.id = NEW.id AND (j.status <> NEW.status OR j.buffered <> NEW.buffered);
      IF FOUND THEN
        later := ARRAY(SELECT e.id FROM background_job_events AS e
                       WHERE e.job_id = NEW.id AND e.xmin = xid(pg_current_xact_id()) AND e.cmin::text::int8 > since ORDER BY e.id);
      END IF;
    END IF;`,
  after: `    FOREACH moved IN ARRAY later LOOP
      UPDATE background_job_events SET id = DEFAULT, tx = greatest(tx, event_tx) WHERE id = moved;
    END LOOP;`,
};

export class NestedEventOrder1764750000000 implements MigrationInterface {
  name = 'NestedEventOrder1764750000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(jobEventFunction(EVENT_TX, NESTED_ORDER));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(jobEventFunction(EVENT_TX));
  }
}
