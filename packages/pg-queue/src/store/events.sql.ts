/** The channel the event triggers NOTIFY (empty payload: one per transaction), which wakes event readers. */
export const EVENTS_CHANNEL = 'pg_queue_events';

/**
 * Reading background_job_events (migration JobEvents1764730000000), in a commit-safe order.
 *
 * A position is (tx, id): the newest xid8 assigned when the row was written, never below its writer's own (migration
 * EventOrder1764740000000: so one job's events follow its changes), and the row's serial. A page holds only rows
 * whose tx is older than the reading statement's horizon (below): their writers have ended, committed (their rows are
 * all visible here) or rolled back (none ever will be), and any transaction still to write takes a newer xid. So
 * the rows past a position, in (tx, id) order, only grow at their end, and a reader that resumes from the last
 * position it handed out misses nothing and sees nothing twice. Ordering by id alone would not do: a serial is
 * taken at insert, so a transaction that commits after a younger one leaves a smaller id behind the reader.
 * The horizon is not the snapshot's xmin but the oldest xid of the snapshot still running in this database (or the
 * snapshot's xmax when none is): a transaction of another database of the cluster can never write this table, so it
 * holds nothing back (it did: the CLI's spec printed no event while a test of another database held a transaction
 * open, CI 2026-12-07). A running xid is skipped only when pg_stat_activity names its backend's database as another
 * one (a backend's database never changes); one it cannot place (it ended meanwhile, a prepared transaction) counts.
 * The price: an event waits for every transaction of this database open when it was written (the app's too) to end;
 * a long transaction delays events, never loses them.
 */
const HORIZON = `coalesce(
      (SELECT min(x) FROM pg_snapshot_xip(pg_current_snapshot()) AS x
       WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity AS a WHERE a.backend_xid = xid(x) AND a.datname IS DISTINCT FROM current_database())),
      pg_snapshot_xmax(pg_current_snapshot()))`;

export const EVENTS_SQL = {
  // A page of up to $5 rows past ($1, $2), in order; `matched` says which pass the filters ($3 queues, $4 types; NULL:
  // all): the reader advances over the others too, so a filter that matches little never rescans the same rows.
  readPage: `
    SELECT id::text AS id, tx::text AS tx, type, job_id::text AS job_id, flow_id::text AS flow_id, queue_name, attempt,
           detail, created_at,
           ($3::text[] IS NULL OR queue_name = ANY($3::text[])) AND ($4::text[] IS NULL OR type = ANY($4::text[])) AS matched
    FROM background_job_events AS e
    WHERE (e.tx, e.id) > ($1::xid8, $2::int8) AND e.tx < ${HORIZON}
    -- Qualified: a bare "tx, id" here would name the output columns, their text (so '104' before '87').
    ORDER BY e.tx, e.id
    LIMIT $5`,

  // The position "now": before every event of a transaction not yet ended.
  head: `SELECT ${HORIZON}::text AS tx`,

  // The queue starts or stops recording events (the function rebuilds the triggers when the set changed).
  record: `SELECT pg_queue_record_events($1::text, $2::boolean) AS queues`,

  recordingQueues: `SELECT queue_name FROM background_queues WHERE record_events ORDER BY queue_name`,

  // Retention (the pruner): one bounded batch of events older than $1 ms, by the database clock.
  deleteBefore: `
    DELETE FROM background_job_events
    WHERE id = ANY(ARRAY(SELECT id FROM background_job_events WHERE created_at < now() - $1::int8 * interval '1 millisecond' LIMIT $2))`,
} as const;
