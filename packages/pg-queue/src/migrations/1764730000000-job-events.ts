import type { MigrationInterface, QueryRunner } from 'typeorm';

/** How a later migration (EventOrder1764740000000) sets an event's `tx`: a plpgsql variable `event_tx` declared with it. */
export interface EventTx {
  declare: string;
}

/**
 * How a later migration (NestedEventOrder1764750000000) keeps a job's events in the order of its changes when a
 * statement run inside the changing one changed the job again: plpgsql declarations, and the code run before and after
 * the event rows are inserted (in the UPDATE branch, with `event_tx` declared).
 */
export interface NestedOrder {
  declare: string;
  before: string;
  after: string;
}

/**
 * One job's change, OLD to NEW, as event types (in order):
 * - insert: `enqueued` (and `started` for a row inserted running);
 * - `started`: the row becomes processing and not buffered (a claim that starts it, or the beat that marks a job
 *   started from a worker's buffer); a settle of a row still marked buffered (a fast job) starts it too;
 * - from processing: `completed`; `failed` then `retrying` (queued again, the attempt charged) or `dead` (failed);
 *   `stalled` (the sweeper took back an expired lease: its last_error says so) then `dead` when that was the last
 *   attempt; `returned` (queued again uncharged: snoozed, released at shutdown, given back from a buffer);
 * - `cancelled` from any status; `dead` for a job failed without running (its flow failed);
 * - `enqueued` for a finished job queued again (retry);
 * - delete of a row in processing: `completed` (`started` first for a row still marked buffered): with
 *   completedRetentionMs 0 the completion deletes the plain job it completes (deleteCompletedJobs); no other
 *   statement deletes a row in processing.
 * `detail` is last_error for the failure types. Each statement that records also sends one NOTIFY (its payload is
 * empty, so PostgreSQL folds a transaction's many into one), which wakes readers.
 *
 * `fromHistory` (HistoryReturnEvents1764770000000): a row inserted already finished (completed, failed, cancelled) is a
 * job partitioned history gives back to background_jobs (a retry's bringBack, history.sql.ts), not an enqueue: it
 * records nothing (its events were written when they happened; the retry's own change records `enqueued`).
 */
export const jobEventFunction = (tx?: EventTx, nested?: NestedOrder, fromHistory = false) => `
  CREATE OR REPLACE FUNCTION background_job_events_record() RETURNS trigger LANGUAGE plpgsql AS $$
  DECLARE
    kinds text[] := '{}';
    swept boolean;${tx ? `\n    ${tx.declare}` : ''}${nested ? `\n    ${nested.declare}` : ''}
  BEGIN
    IF TG_OP = 'DELETE' THEN
      INSERT INTO background_job_events (type, job_id, flow_id, queue_name, attempt${tx ? ', tx' : ''})
      SELECT k.kind, OLD.id, OLD.flow_id, OLD.queue_name, OLD.attempts + OLD.buffered::int${tx ? ', event_tx' : ''}
      FROM unnest(CASE WHEN OLD.buffered THEN ARRAY['started', 'completed'] ELSE ARRAY['completed'] END) WITH ORDINALITY AS k (kind, n) ORDER BY k.n;
      PERFORM pg_notify('pg_queue_events', '');
      RETURN NULL;
    ELSIF TG_OP = 'INSERT' THEN${fromHistory ? `
      IF NEW.status IN ('completed', 'failed', 'cancelled') THEN RETURN NULL; END IF;` : ''}
      kinds := ARRAY['enqueued'];
      IF NEW.status = 'processing' AND NOT NEW.buffered THEN kinds := kinds || 'started'::text; END IF;
    ELSIF NEW.status = 'processing' THEN
      IF NOT NEW.buffered AND (OLD.status <> 'processing' OR OLD.buffered) THEN kinds := ARRAY['started']; END IF;
    ELSIF NEW.status = OLD.status THEN
      RETURN NULL;
    ELSIF NEW.status = 'cancelled' THEN
      kinds := ARRAY['cancelled'];
    ELSIF OLD.status = 'processing' THEN
      swept := NOT OLD.buffered AND OLD.lease_expires_at < now() AND NEW.last_error LIKE 'lease expired:%';
      IF swept THEN
        kinds := ARRAY['stalled'];
      ELSIF NEW.status = 'completed' OR NEW.status = 'failed' OR NEW.attempts = OLD.attempts + OLD.buffered::int THEN
        IF OLD.buffered THEN kinds := ARRAY['started']; END IF;
        kinds := kinds || CASE WHEN NEW.status = 'completed' THEN 'completed' ELSE 'failed' END;
        IF NEW.status = 'queued' THEN kinds := kinds || 'retrying'::text; END IF;
      ELSE
        kinds := ARRAY['returned'];
      END IF;
      IF NEW.status = 'failed' THEN kinds := kinds || 'dead'::text; END IF;
    ELSIF NEW.status = 'failed' THEN
      kinds := ARRAY['dead'];
    ELSIF OLD.status IN ('completed', 'failed', 'cancelled') THEN
      kinds := ARRAY['enqueued'];
    END IF;
    IF cardinality(kinds) = 0 THEN RETURN NULL; END IF;${nested ? `\n${nested.before}` : ''}
    INSERT INTO background_job_events (type, job_id, flow_id, queue_name, attempt, detail${tx ? ', tx' : ''})
    SELECT k.kind, NEW.id, NEW.flow_id, NEW.queue_name, NEW.attempts,
           CASE WHEN k.kind IN ('failed', 'retrying', 'dead', 'stalled') THEN NEW.last_error END${tx ? ', event_tx' : ''}
    FROM unnest(kinds) WITH ORDINALITY AS k (kind, n) ORDER BY k.n;${nested ? `\n${nested.after}` : ''}
    PERFORM pg_notify('pg_queue_events', '');
    RETURN NULL;
  END $$`;

/**
 * A flow that ends (finished_at set): `flow-finished`, detail its final status, queue the first recording queue
 * among its jobs (a flow has no queue of its own; one with none in a recording queue records nothing). A flow ends
 * once, so the lookup (by background_jobs_flow_idx) is off every job's path.
 */
export const flowEventFunction = (tx?: EventTx) => `
  CREATE OR REPLACE FUNCTION background_flow_events_record() RETURNS trigger LANGUAGE plpgsql AS $$
  DECLARE
    q text;${tx ? `\n    ${tx.declare}` : ''}
  BEGIN
    SELECT j.queue_name INTO q FROM background_jobs AS j
    JOIN background_queues AS r ON r.queue_name = j.queue_name AND r.record_events
    WHERE j.flow_id = NEW.id ORDER BY j.id LIMIT 1;
    IF q IS NULL THEN RETURN NULL; END IF;
    INSERT INTO background_job_events (type, flow_id, queue_name, detail${tx ? ', tx' : ''}) VALUES ('flow-finished', NEW.id, q, NEW.status${tx ? ', event_tx' : ''});
    PERFORM pg_notify('pg_queue_events', '');
    RETURN NULL;
  END $$`;

/**
 * pg_queue_record_events(queue, on): stores the queue's choice and, when the set of recording queues changed,
 * rebuilds the triggers with the set in their WHEN clause (none when the set is empty). Returns the set. One caller
 * at a time (the advisory lock); an unchanged set takes no lock on background_jobs, so calling it at every boot is
 * free. A change takes SHARE ROW EXCLUSIVE on background_jobs for the catalog change only (lock_timeout 5 s: it
 * fails rather than queue every enqueue and claim behind a long transaction).
 */
const EVENT_TRIGGERS_FUNCTION = `
  CREATE OR REPLACE FUNCTION pg_queue_record_events(queue text, record boolean) RETURNS text[] LANGUAGE plpgsql AS $$
  DECLARE
    before text[];
    after text[];
  BEGIN
    PERFORM pg_advisory_xact_lock(7263514006);
    SELECT coalesce(array_agg(queue_name ORDER BY queue_name), '{}') INTO before FROM background_queues WHERE record_events;
    INSERT INTO background_queues (queue_name, record_events) VALUES (queue, record)
    ON CONFLICT (queue_name) DO UPDATE SET record_events = EXCLUDED.record_events, updated_at = now();
    SELECT coalesce(array_agg(queue_name ORDER BY queue_name), '{}') INTO after FROM background_queues WHERE record_events;
    IF after = before AND (cardinality(after) = 0) = NOT EXISTS (
        SELECT 1 FROM pg_trigger WHERE tgrelid = 'background_jobs'::regclass AND tgname = 'background_jobs_events_update') THEN
      RETURN after;
    END IF;
    PERFORM set_config('lock_timeout', '5s', true);
    DROP TRIGGER IF EXISTS background_jobs_events_insert ON background_jobs;
    DROP TRIGGER IF EXISTS background_jobs_events_update ON background_jobs;
    DROP TRIGGER IF EXISTS background_jobs_events_delete ON background_jobs;
    DROP TRIGGER IF EXISTS background_flows_events ON background_flows;
    IF cardinality(after) > 0 THEN
      EXECUTE format('CREATE TRIGGER background_jobs_events_insert AFTER INSERT ON background_jobs FOR EACH ROW'
        ' WHEN (NEW.queue_name = ANY (%L::text[])) EXECUTE FUNCTION background_job_events_record()', after);
      EXECUTE format('CREATE TRIGGER background_jobs_events_update AFTER UPDATE OF status, buffered ON background_jobs FOR EACH ROW'
        ' WHEN (NEW.queue_name = ANY (%L::text[]) AND (OLD.status <> NEW.status OR OLD.buffered <> NEW.buffered))'
        ' EXECUTE FUNCTION background_job_events_record()', after);
      EXECUTE format('CREATE TRIGGER background_jobs_events_delete AFTER DELETE ON background_jobs FOR EACH ROW'
        ' WHEN (OLD.queue_name = ANY (%L::text[]) AND OLD.status = ''processing'')'
        ' EXECUTE FUNCTION background_job_events_record()', after);
      CREATE TRIGGER background_flows_events AFTER UPDATE OF finished_at ON background_flows FOR EACH ROW
        WHEN (OLD.finished_at IS NULL AND NEW.finished_at IS NOT NULL) EXECUTE FUNCTION background_flow_events_record();
    END IF;
    RETURN after;
  END $$`;

/**
 * The resumable event stream (README: "Event stream"): background_job_events, one row per state change of a job in
 * a queue that records events, written by triggers on background_jobs (and background_flows for flow-finished), so
 * that every path is covered: enqueues from SQL, the sweeper, admin actions, every process.
 *
 * - `tx` is the writing transaction's id (xid8; since EventOrder1764740000000 the newest xid when the row is
 *   written, never below the writer's own). A reader hands out only events of transactions older than its snapshot's xmin, in (tx, id) order: every such transaction has ended, so no event can later appear before one
 *   already handed out (a bigserial is taken at insert, not at commit; ordering by it alone skips the event of a
 *   transaction that commits after a younger one). See events.sql.ts.
 * - Opt-in per queue (`background_queues.record_events`, set by pg_queue_record_events()): that function rebuilds
 *   the triggers with the recording queues written into their WHEN clause as a constant array, so a queue that does
 *   not record pays one comparison evaluated in C per row (no function call, no lookup), and with no recording
 *   queue there is no trigger at all. Nothing in the enqueue, claim or settle statements changes.
 * No trigger is made here: none until a queue opts in.
 */
export class JobEvents1764730000000 implements MigrationInterface {
  name = 'JobEvents1764730000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE IF NOT EXISTS background_job_events (
        id         bigserial PRIMARY KEY,
        tx         xid8 NOT NULL DEFAULT pg_current_xact_id(),
        type       text NOT NULL,
        job_id     bigint,
        flow_id    bigint,
        queue_name text,
        attempt    integer,
        detail     text,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX IF NOT EXISTS background_job_events_order_idx ON background_job_events (tx, id)`);
    await q.query(`CREATE INDEX IF NOT EXISTS background_job_events_created_idx ON background_job_events (created_at)`);
    // Small table (one row per queue): the catalog change alone; background_jobs is not touched.
    await q.query(`ALTER TABLE background_queues ADD COLUMN IF NOT EXISTS record_events boolean NOT NULL DEFAULT false`);
    await q.query(jobEventFunction());
    await q.query(flowEventFunction());
    await q.query(EVENT_TRIGGERS_FUNCTION);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER IF EXISTS background_jobs_events_insert ON background_jobs`);
    await q.query(`DROP TRIGGER IF EXISTS background_jobs_events_update ON background_jobs`);
    await q.query(`DROP TRIGGER IF EXISTS background_jobs_events_delete ON background_jobs`);
    await q.query(`DROP TRIGGER IF EXISTS background_flows_events ON background_flows`);
    await q.query(`DROP FUNCTION IF EXISTS pg_queue_record_events(text, boolean)`);
    await q.query(`DROP FUNCTION IF EXISTS background_job_events_record()`);
    await q.query(`DROP FUNCTION IF EXISTS background_flow_events_record()`);
    await q.query(`ALTER TABLE background_queues DROP COLUMN IF EXISTS record_events`);
    await q.query(`DROP TABLE IF EXISTS background_job_events`);
  }
}
