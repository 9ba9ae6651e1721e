/**
 * The statements of metrics and health checks. Each one reads a bounded number of pages whatever the table's
 * size (asserted on EXPLAIN at 1M rows in test/metrics-plan.spec.ts), so a scrape or a probe cannot turn into a
 * scan of background_jobs.
 */
import { IN_FLIGHT_READ } from './shown-status.sql.js';

/**
 * The queues with queued jobs and, per queue, the run_at of its earliest queued job: a loose scan of the claim
 * index (queue_name, priority DESC, run_at, id) over its (queue, priority) pairs, one probe per pair, then the
 * first run_at under each pair. Its cost grows with the number of queues and distinct priorities, not with jobs.
 * (A single min(run_at) per queue cannot stop early on that index, since run_at comes after priority.)
 */
const QUEUED_QUEUES = `
    pairs AS (
      (SELECT queue_name, priority FROM background_jobs WHERE status = 'queued' ORDER BY queue_name, priority DESC LIMIT 1)
      UNION ALL
      SELECT n.queue_name, n.priority FROM pairs AS p CROSS JOIN LATERAL (
        (SELECT b.queue_name, b.priority FROM background_jobs AS b
         WHERE b.status = 'queued' AND b.queue_name = p.queue_name AND b.priority < p.priority ORDER BY b.priority DESC LIMIT 1)
        UNION ALL
        (SELECT b.queue_name, b.priority FROM background_jobs AS b
         WHERE b.status = 'queued' AND b.queue_name > p.queue_name ORDER BY b.queue_name, b.priority DESC LIMIT 1)
        LIMIT 1
      ) AS n
    ), queues AS (
      SELECT p.queue_name, min((SELECT j.run_at FROM background_jobs AS j
        WHERE j.queue_name = p.queue_name AND j.status = 'queued' AND j.priority = p.priority ORDER BY j.run_at LIMIT 1)) AS first_run_at
      FROM pairs AS p GROUP BY p.queue_name
    )`;

/**
 * The queues with waiting jobs and, per queue, the run_at of its earliest one: queued jobs (QUEUED_QUEUES, which
 * must come first) and buffered jobs (in a worker's read-ahead buffer: claimed, not started), read from `inFlight`
 * (a relation of in-flight rows: queue_name, run_at, buffered). A buffered job is due, and a frozen worker's
 * buffer must show in the lag.
 */
const waitingQueues = (inFlight: string) => `
    waiting AS (
      SELECT w.queue_name, min(w.first_run_at) AS first_run_at FROM (
        SELECT queue_name, first_run_at FROM queues
        UNION ALL
        SELECT f.queue_name, f.run_at FROM ${inFlight} AS f WHERE f.buffered
      ) AS w GROUP BY w.queue_name
    )`;

/** ms since the earliest waiting job of the queue came due; 0 when none is due yet. */
const OLDEST_DUE_MS = `greatest(0, extract(epoch FROM now() - q.first_run_at) * 1000)::float8`;

export const METRICS_SQL = {
  // The depth gauges of one scrape, in one statement ($1: exact limit, $2: pages an estimate samples). Rows of
  // (queue_name, state, n, approximate): a job status, or 'oldest_due_ms' (n: the queue's lag).
  // Counts are exact up to $1 per queue and status, read through the partial indexes with a LIMIT as stats()
  // does: queued jobs per queue through the claim index; in-flight jobs through the in-flight index (running
  // ones as 'processing', buffered ones as 'buffered': the caller counts those as queued, and their run_at
  // counts in the lag; the two are one capped read, so past the cap both are estimated) and
  // finished jobs through the finished-jobs index and blocked flow jobs through theirs, up to $1 + 1 rows per status
  // across queues. A count past
  // $1 (per queue for queued jobs; per status for the others, whose capped read may miss some queues) is
  // estimated from a sample of about $2 pages (TABLESAMPLE SYSTEM reads whole random pages), scaled up; a
  // queued count is never reported below what was counted. The sample is a MATERIALIZED CTE read only under
  // the one-time filter `EXISTS (SELECT 1 FROM over)`: when nothing is over the limit it never runs. A status
  // over the limit across queues that the sample did not meet at all (buffered jobs beside many running ones,
  // say) has no queue to be reported under: it reads 0.
  depthSnapshot: `
    WITH RECURSIVE ${QUEUED_QUEUES}, in_flight AS MATERIALIZED (
      SELECT queue_name, run_at, buffered FROM background_jobs WHERE status = 'processing' ORDER BY locked_by, id LIMIT $1 + 1
    ), ${waitingQueues('in_flight')}, exact AS (
      SELECT q.queue_name, 'queued' AS state, (SELECT count(*) FROM (
          SELECT 1 FROM background_jobs AS j WHERE j.queue_name = q.queue_name AND j.status = 'queued'
          ORDER BY j.priority DESC, j.run_at, j.id LIMIT $1 + 1) AS s) AS n
      FROM queues AS q
      UNION ALL
      SELECT r.queue_name, CASE WHEN r.buffered THEN 'buffered' ELSE 'processing' END, count(*)
      FROM in_flight AS r
      GROUP BY 1, 2
      UNION ALL
      SELECT f.queue_name, f.status::text, count(*) FROM (
        (SELECT queue_name, status FROM background_jobs_all WHERE status = 'completed' AND finished_at IS NOT NULL ORDER BY finished_at LIMIT $1 + 1)
        UNION ALL
        (SELECT queue_name, status FROM background_jobs_all WHERE status = 'failed' AND finished_at IS NOT NULL ORDER BY finished_at LIMIT $1 + 1)
        UNION ALL
        (SELECT queue_name, status FROM background_jobs_all WHERE status = 'cancelled' AND finished_at IS NOT NULL ORDER BY finished_at LIMIT $1 + 1)
        UNION ALL
        -- flow jobs waiting for their parents, through the flow jobs' status index
        (SELECT queue_name, status FROM background_jobs WHERE status = 'blocked' AND flow_id IS NOT NULL ORDER BY status, id LIMIT $1 + 1)
        UNION ALL
        -- successors waiting for a running job of their key (onConflict 'queue-after'), through their table
        (SELECT w.queue_name, w.status FROM background_job_successors AS s
         CROSS JOIN LATERAL (SELECT j.queue_name, j.status FROM background_jobs AS j WHERE j.id = s.job_id AND j.status = 'blocked' LIMIT 1) AS w LIMIT $1 + 1)
      ) AS f GROUP BY f.queue_name, f.status
    ), over AS MATERIALIZED (
      SELECT queue_name, state FROM exact WHERE state = 'queued' AND n > $1
      UNION ALL
      SELECT NULL, state FROM exact WHERE state NOT IN ('queued', 'processing', 'buffered') GROUP BY state HAVING sum(n) > $1
      UNION ALL
      SELECT NULL, f.state FROM (VALUES ('processing'), ('buffered')) AS f(state) WHERE (SELECT count(*) FROM in_flight) > $1
    ), sample AS MATERIALIZED (
      -- background_jobs and partitioned history (README: "Long retention: partitioned history"), each sampled on about $2
      -- of its own pages
      SELECT t.queue_name, t.state, sum(t.n) AS n FROM (
        SELECT s.queue_name, s.state, count(*) * 100 / min(s.pct) AS n
        FROM (SELECT least(100, 100.0 * $2 / greatest(1, pg_relation_size('background_jobs') / current_setting('block_size')::int))::float8 AS pct) AS c,
          LATERAL (SELECT queue_name, CASE WHEN status = 'processing' AND buffered THEN 'buffered' ELSE status::text END AS state, c.pct
                   FROM background_jobs TABLESAMPLE SYSTEM (c.pct)) AS s
        GROUP BY s.queue_name, s.state
        UNION ALL
        SELECT s.queue_name, s.state, count(*) * 100 / min(s.pct)
        FROM (SELECT least(100, 100.0 * $2 / greatest(1, coalesce((SELECT sum(pg_relation_size(i.inhrelid)) FROM pg_inherits AS i
                WHERE i.inhparent IN (to_regclass('background_jobs_history_completed'), to_regclass('background_jobs_history_failed'))), 0)
                / current_setting('block_size')::int))::float8 AS pct) AS c,
          LATERAL (SELECT queue_name, status::text AS state, c.pct FROM background_jobs_history TABLESAMPLE SYSTEM (c.pct)) AS s
        GROUP BY s.queue_name, s.state
      ) AS t GROUP BY t.queue_name, t.state
    )
    SELECT e.queue_name, e.state, e.n::float8 AS n, false AS approximate FROM exact AS e
    WHERE NOT EXISTS (SELECT 1 FROM over AS o WHERE o.state = e.state AND (o.queue_name IS NULL OR o.queue_name = e.queue_name))
    UNION ALL
    SELECT coalesce(s.queue_name, o.queue_name), o.state,
      round(greatest(coalesce(s.n, 0), CASE WHEN o.queue_name IS NULL THEN 0 ELSE $1 + 1 END))::float8, true
    FROM over AS o LEFT JOIN sample AS s ON s.state = o.state AND (o.queue_name IS NULL OR s.queue_name = o.queue_name)
    WHERE EXISTS (SELECT 1 FROM over) AND coalesce(s.queue_name, o.queue_name) IS NOT NULL
    UNION ALL
    SELECT q.queue_name, 'oldest_due_ms', ${OLDEST_DUE_MS}, false FROM waiting AS q`,

  // Health: per queue with waiting jobs (queued, or buffered in a worker), ms since its earliest one came due
  // (0: none due yet). Buffered jobs are looked for among the first IN_FLIGHT_READ in-flight rows.
  oldestDue: `
    WITH RECURSIVE ${QUEUED_QUEUES}, ${waitingQueues(`(SELECT queue_name, run_at, buffered FROM background_jobs WHERE status = 'processing' ORDER BY locked_by, id LIMIT ${IN_FLIGHT_READ})`)}
    SELECT q.queue_name, ${OLDEST_DUE_MS} AS oldest_due_ms FROM waiting AS q`,

  ping: `SELECT 1`,
} as const;

/** Opens the read-only transaction a metrics statement runs in, with its own statement timeout (ms, an integer). */
export function beginWithTimeout(timeoutMs: number): string {
  if (!Number.isInteger(timeoutMs) || timeoutMs < 0) throw new TypeError(`statement timeout must be a non-negative integer, got ${timeoutMs}`);
  return `BEGIN READ ONLY; SET LOCAL statement_timeout = ${timeoutMs}`;
}
