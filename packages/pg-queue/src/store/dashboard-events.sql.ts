// The dashboard's reads of the event stream's table (migration JobEvents1764730000000).
// Every read is bounded twice: a window of at most $scan rows walked on an index ((tx, id) or created_at), then the
// page's LIMIT among them, so a filter that matches little reads the window and stops, never the whole table.

/** The columns of an event as the dashboard shows it; `detail` (a job's last error: it may hold payload data) only when $withDetail, or a flow's final status. */
const COLUMNS = (withDetail: string) => `
  w.id::text AS id, w.tx::text AS tx, w.type, w.job_id::text AS job_id, w.flow_id::text AS flow_id, w.queue_name, w.attempt,
  CASE WHEN ${withDetail} OR w.type = 'flow-finished' THEN w.detail END AS detail, w.created_at`;

/** $1 queue, $2 type (NULL: any), $3 page size, $4 scan window, $5 detail shown; the cursor is $6 tx, $7 id. */
const PAGE_FILTER = `($1::text IS NULL OR w.queue_name = $1) AND ($2::text IS NULL OR w.type = $2)`;

export const DASHBOARD_EVENTS_SQL = {
  // Whether the migration has run (the page says so rather than fail).
  installed: `SELECT to_regclass('background_job_events') IS NOT NULL AS installed`,

  recordingQueues: `SELECT queue_name FROM background_queues WHERE record_events ORDER BY queue_name`,

  // Newest first, from the newest event: the newest $4 rows by (tx, id) walked backwards on background_job_events_order_idx.
  newest: `
    SELECT ${COLUMNS('$5::boolean')}
    FROM (SELECT * FROM background_job_events AS e ORDER BY e.tx DESC, e.id DESC LIMIT $4) AS w
    WHERE ${PAGE_FILTER}
    ORDER BY w.tx DESC, w.id DESC
    LIMIT $3`,

  // Newest first, below the cursor ($6, $7): an older page.
  older: `
    SELECT ${COLUMNS('$5::boolean')}
    FROM (SELECT * FROM background_job_events AS e WHERE (e.tx, e.id) < ($6::xid8, $7::int8) ORDER BY e.tx DESC, e.id DESC LIMIT $4) AS w
    WHERE ${PAGE_FILTER}
    ORDER BY w.tx DESC, w.id DESC
    LIMIT $3`,

  // Oldest first, above the cursor ($6, $7): a newer page (shown newest first).
  newer: `
    SELECT ${COLUMNS('$5::boolean')}
    FROM (SELECT * FROM background_job_events AS e WHERE (e.tx, e.id) > ($6::xid8, $7::int8) ORDER BY e.tx, e.id LIMIT $4) AS w
    WHERE ${PAGE_FILTER}
    ORDER BY w.tx, w.id
    LIMIT $3`,

  // The last row of a scan window (its $3-th row past the cursor $1, $2; $1 NULL: from the newest), where the next
  // page goes on when the window matched less than a page; none: the window reached the end of the table.
  windowEndOlder: `
    SELECT e.tx::text AS tx, e.id::text AS id FROM background_job_events AS e
    WHERE $1::xid8 IS NULL OR (e.tx, e.id) < ($1::xid8, $2::int8)
    ORDER BY e.tx DESC, e.id DESC OFFSET $3 - 1 LIMIT 1`,
  windowEndNewer: `
    SELECT e.tx::text AS tx, e.id::text AS id FROM background_job_events AS e
    WHERE (e.tx, e.id) > ($1::xid8, $2::int8)
    ORDER BY e.tx, e.id OFFSET $3 - 1 LIMIT 1`,

  // One job's events (there is no index on job_id: one would cost every recorded change a write): among the first $3
  // events recorded from the job's creation ($2, by background_job_events_created_idx) and the newest $3, in order.
  jobEvents: `
    SELECT ${COLUMNS('$4::boolean')}
    FROM (
      -- Each window filtered on its own (a filter cannot go below a LIMIT): the UNION then sorts the job's few rows,
      -- not the windows' 20,000 (36 ms to 8 ms at a million events).
      SELECT * FROM (SELECT * FROM background_job_events AS e WHERE e.created_at >= $2::timestamptz ORDER BY e.created_at LIMIT $3) AS f WHERE f.job_id = $1
      UNION
      SELECT * FROM (SELECT * FROM background_job_events AS e ORDER BY e.tx DESC, e.id DESC LIMIT $3) AS l WHERE l.job_id = $1
    ) AS w
    ORDER BY w.tx, w.id
    LIMIT $5`,

  // Whether more than $2 events were recorded from $1 on: then the job's events between the two windows may be missing.
  busySince: `SELECT count(*) >= $2 AS busy FROM (SELECT 1 FROM background_job_events WHERE created_at >= $1::timestamptz ORDER BY created_at LIMIT $2) AS s`,
} as const;
