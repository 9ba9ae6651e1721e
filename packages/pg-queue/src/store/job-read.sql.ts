// Reads of jobs: one job, its attempts, what waitFor() marks and polls, the counts of stats().
import { JOBS_CHANNEL } from '../pg-queue.constants.js';

export const JOB_READ_SQL = {
  // The row, and for onConflict 'queue-after' the successor that waits for it (a live holder's), or the holder a waiting
  // successor (blocked, with a key, of no flow) waits for: two probes, of background_job_successors and of the unique
  // index, made only for a job with a unique key.
  getJob: `
    SELECT j.*,
      (SELECT s.job_id::text FROM background_job_successors AS s
       WHERE j.unique_key IS NOT NULL AND j.status IN ('queued', 'processing') AND s.queue_name = j.queue_name AND s.unique_key = j.unique_key
         AND s.job_id <> j.id) AS successor_id,
      (SELECT h.id::text FROM background_jobs AS h
       WHERE j.unique_key IS NOT NULL AND j.status = 'blocked' AND j.flow_id IS NULL
         AND h.queue_name = j.queue_name AND h.unique_key = j.unique_key AND h.status IN ('queued', 'processing') LIMIT 1) AS waits_for_id
    FROM background_jobs_all AS j WHERE j.id = $1`,

  // A job's attempt history (README: "Attempt history"), oldest first, the durations by the database clock.
  jobAttempts: `
    SELECT attempt, worker, started_at, finished_at, outcome, error,
      (extract(epoch FROM finished_at - started_at) * 1000)::float8 AS duration_ms
    FROM background_job_attempts WHERE job_id = $1 ORDER BY id`,

  // waitFor(): marks a job not finished yet as awaited (so the statement that finishes it sends a notice) and
  // reads where it stands, in one round trip. The read is of the statement's snapshot: when a settle committed
  // meanwhile, the mark found the row finished (marked = false) while the read still sees it running, and the
  // caller reads it again.
  // The mark locks the row until it commits, and waitFor usually runs right after enqueue: a claim woken by the
  // enqueue's NOTIFY meanwhile skips the row (FOR UPDATE SKIP LOCKED), sets no timer for it (it is due), and
  // would sleep until the next NOTIFY or poll (30 s by default; about 1 call in 25 waited so). So a mark of a
  // queued, due row wakes its queue too: the NOTIFY goes out at commit, once the lock is gone, and a claim that
  // skipped the row claims again. A running or delayed job needs no wake-up (nor does a job no longer queued).
  markAwaited: `
    WITH marked AS (
      UPDATE background_jobs SET awaited = true WHERE id = $1 AND status IN ('queued', 'processing')
      RETURNING id, status, queue_name, run_at
    )
    SELECT id, status, result, last_error, EXISTS (SELECT 1 FROM marked) AS marked,
      (SELECT count(pg_notify('${JOBS_CHANNEL}', m.queue_name)) FROM marked AS m WHERE m.status = 'queued' AND m.run_at <= now()) AS woken
    FROM background_jobs_all WHERE id = $1`,

  // The waiters' poll (and what a finish notice triggers): where the awaited jobs stand.
  jobOutcomes: `SELECT id, status, result, last_error FROM background_jobs_all WHERE id = ANY($1::int8[])`,

  // stats(), exact up to $1 jobs per queue and status, read through the partial indexes with a LIMIT so the
  // cost grows with neither retention nor backlog: the queues that have queued jobs, one claim-index probe
  // each (a loose index scan), then up to $1 + 1 entries per queue; in-flight jobs (few), as 'processing' (running)
  // or 'buffered' (in a worker's read-ahead buffer: the caller counts them as queued); finished jobs through
  // the finished-jobs index, up to $1 + 1 rows per status. A count past $1 means "more": the caller estimates
  // it with countSample, sized by the table's pages (the 'pages' row). Each ORDER BY is its index's order: with
  // a LIMIT and no order, the planner may pick a sequential scan that reads the whole table when a status has
  // no rows.
  countByStatus: `
    WITH RECURSIVE queues AS (
      (SELECT queue_name FROM background_jobs WHERE status = 'queued' ORDER BY queue_name LIMIT 1)
      UNION ALL
      SELECT (SELECT b.queue_name FROM background_jobs AS b WHERE b.status = 'queued' AND b.queue_name > q.queue_name ORDER BY b.queue_name LIMIT 1)
      FROM queues AS q WHERE q.queue_name IS NOT NULL
    )
    SELECT q.queue_name, 'queued' AS status,
      (SELECT count(*)::int FROM (
         SELECT 1 FROM background_jobs AS j WHERE j.queue_name = q.queue_name AND j.status = 'queued'
         ORDER BY j.priority DESC, j.run_at, j.id LIMIT $1 + 1) AS s) AS n
    FROM queues AS q WHERE q.queue_name IS NOT NULL
    UNION ALL
    SELECT r.queue_name, CASE WHEN r.buffered THEN 'buffered' ELSE 'processing' END, count(*)::int
    FROM (SELECT queue_name, buffered FROM background_jobs WHERE status = 'processing' ORDER BY locked_by, id LIMIT $1 + 1) AS r GROUP BY 1, 2
    UNION ALL
    SELECT b.queue_name, 'blocked', count(*)::int
    FROM ((SELECT queue_name FROM background_jobs WHERE status = 'blocked' AND flow_id IS NOT NULL ORDER BY status, id LIMIT $1 + 1)
          UNION ALL
          -- successors waiting for a running job of their key (onConflict 'queue-after'), through their table
          -- (a primary-key probe per successor: a join was planned as a hash join over a scan of background_jobs)
          (SELECT w.queue_name FROM background_job_successors AS s
           CROSS JOIN LATERAL (SELECT j.queue_name FROM background_jobs AS j WHERE j.id = s.job_id AND j.status = 'blocked' LIMIT 1) AS w LIMIT $1 + 1)) AS b
    GROUP BY 1
    UNION ALL
    SELECT f.queue_name, 'completed', count(*)::int
    FROM (SELECT queue_name FROM background_jobs_all WHERE status = 'completed' AND finished_at IS NOT NULL ORDER BY finished_at LIMIT $1 + 1) AS f
    GROUP BY f.queue_name
    UNION ALL
    SELECT f.queue_name, 'failed', count(*)::int
    FROM (SELECT queue_name FROM background_jobs_all WHERE status = 'failed' AND finished_at IS NOT NULL ORDER BY finished_at LIMIT $1 + 1) AS f
    GROUP BY f.queue_name
    UNION ALL
    SELECT f.queue_name, 'cancelled', count(*)::int
    FROM (SELECT queue_name FROM background_jobs_all WHERE status = 'cancelled' AND finished_at IS NOT NULL ORDER BY finished_at LIMIT $1 + 1) AS f
    GROUP BY f.queue_name
    UNION ALL
    SELECT NULL, 'pages', (pg_relation_size('background_jobs') / current_setting('block_size')::int)::int
    UNION ALL
    SELECT NULL, 'history_pages', (coalesce((SELECT sum(pg_relation_size(i.inhrelid)) FROM pg_inherits AS i
      WHERE i.inhparent IN (to_regclass('background_jobs_history_completed'), to_regclass('background_jobs_history_failed'))), 0)
      / current_setting('block_size')::int)::int`,

  // stats() above its exact cap: counts per queue and status from a sample of about $1 percent of the
  // table's pages (TABLESAMPLE SYSTEM reads whole random pages), scaled up; buffered jobs as 'buffered'. Partitioned
  // history's finished jobs from a sample of $2 percent of its pages, added.
  countSample: `
    SELECT s.queue_name, s.status, sum(s.n)::int8 AS n FROM (
      SELECT queue_name, CASE WHEN status = 'processing' AND buffered THEN 'buffered' ELSE status::text END AS status,
        round(count(*) * 100 / $1::float8)::int8 AS n
      FROM background_jobs TABLESAMPLE SYSTEM ($1::float8) GROUP BY 1, 2
      UNION ALL
      SELECT queue_name, status::text, round(count(*) * 100 / $2::float8)::int8
      FROM background_jobs_history TABLESAMPLE SYSTEM ($2::float8) GROUP BY 1, 2
    ) AS s GROUP BY 1, 2`,
} as const;
