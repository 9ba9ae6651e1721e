// Statements of the embedded dashboard (src/dashboard). Each one reads a bounded part of background_jobs
// through an index, whatever the table's size: a page never scans the table (test/dashboard-plans.spec.ts
// EXPLAINs each on a million rows). They run unnamed inside a read transaction with a statement timeout
// (dashboard.store.ts), so PostgreSQL plans each call with its actual filters (NULL IS NULL folds away).
import { jobListKeyset, type JobListOrder } from './job-list-order.js';
import { JOB_READ_SQL } from './job-read.sql.js';
import { bufferedHeads, IN_FLIGHT_READ, shownStatus, shownStatusIn } from './shown-status.sql.js';

/**
 * The columns of a row of the jobs list; the last error cut to its first line's first 200 characters; the
 * status as reports show it (a buffered job, in a worker's read-ahead buffer, is queued).
 */
const LIST_COLUMNS = `
      j.id, j.queue_name, ${shownStatus('j')} AS status, j.attempts, j.max_attempts, j.priority, j.run_at, j.created_at, j.finished_at,
      j.locked_at, j.unique_key, left(split_part(j.last_error, E'\\n', 1), 200) AS last_error, now() AS now`;

/**
 * Queues that hold queued or running jobs: a loose index scan of the claim index (one probe per queue) and
 * the running jobs (few, through the in-flight index). A unique key is held only by such jobs.
 */
const LIVE_QUEUES = `
    ARRAY(
      WITH RECURSIVE queued AS (
        (SELECT queue_name FROM background_jobs WHERE status = 'queued' ORDER BY queue_name LIMIT 1)
        UNION ALL
        SELECT (SELECT b.queue_name FROM background_jobs AS b WHERE b.status = 'queued' AND b.queue_name > q.queue_name ORDER BY b.queue_name LIMIT 1)
        FROM queued AS q WHERE q.queue_name IS NOT NULL
      )
      SELECT queue_name FROM queued WHERE queue_name IS NOT NULL
      UNION
      SELECT p.queue_name FROM (SELECT queue_name FROM background_jobs WHERE status = 'processing' ORDER BY locked_by, id LIMIT 10000) AS p
    )`;

/**
 * For a blocked job `j`: the refs of the parents it still waits for (the first $refs of them, by id; a parent
 * without a ref shows its id) and how many there are, counted up to WAITING_COUNT_CAP (a fan-in of 10,000 parents
 * reads that many open edges, not all of them). Through the open-edges index (child_id) WHERE NOT done. Null for
 * a job that is not blocked: nothing is read for it.
 */
export const WAITING_COUNT_CAP = 1_000;
const waitingFor = (j: string, refs: string) => `
      CASE WHEN ${j}.status = 'blocked' THEN ARRAY(
        SELECT coalesce(p.flow_ref, p.id::text) FROM background_job_deps AS d JOIN background_jobs AS p ON p.id = d.parent_id
        WHERE d.child_id = ${j}.id AND NOT d.done ORDER BY d.parent_id LIMIT ${refs}) END AS waiting_for,
      CASE WHEN ${j}.status = 'blocked' THEN (
        SELECT count(*)::int FROM (SELECT 1 FROM background_job_deps AS d WHERE d.child_id = ${j}.id AND NOT d.done LIMIT ${WAITING_COUNT_CAP}) AS o) END AS waiting`;

/** The jobs list's page in an order (job-list-order.ts: the CLI's `jobs list` orders by the same ORDER BY). */
function listJobs(order: JobListOrder): string {
  return `
    SELECT ${LIST_COLUMNS}, CASE WHEN $6::boolean THEN left(j.payload::text, 160) END AS payload_preview
    FROM background_jobs_all AS j
    WHERE j.id < $1::int8 AND j.id >= $2::int8
      AND ($3::text IS NULL OR j.queue_name = $3::text)
      AND ($4::background_job_status IS NULL OR ${shownStatusIn('j', 'ARRAY[$4::background_job_status]')})
      AND ($7::text IS NULL OR ($7::text = 'scheduled') = (j.run_at > now()))
      AND ($8::text IS NULL OR strpos(lower(j.payload::text), lower($8::text)) > 0 OR strpos(lower(j.last_error), lower($8::text)) > 0)
    ORDER BY ${jobListKeyset(order, '$1').orderBy} LIMIT $5`;
}

export const DASHBOARD_SQL = {
  pausedQueues: `SELECT queue_name FROM background_queues WHERE paused ORDER BY queue_name`,

  // Per queue of $1: how long its oldest due job has waited (null: nothing due). The claim index
  // (queue_name, priority DESC, run_at, id) WHERE status = 'queued' holds each priority's earliest run_at first:
  // a loose index scan takes one entry per priority (one probe each, at most 100 priorities) and the minimum of
  // those is the queue's. Reading all of a queue's queued entries instead costs as much as its backlog.
  // Buffered jobs (claimed into a worker's read-ahead buffer, not started) wait too: the earliest run_at of
  // each queue's, from the first IN_FLIGHT_READ in-flight rows (few), counts as well.
  oldestDue: `
    WITH buffered AS (${bufferedHeads(String(IN_FLIGHT_READ))}
    )
    SELECT q.name AS queue_name,
      CASE WHEN least(o.run_at, b.run_at) <= now() THEN (extract(epoch FROM now() - least(o.run_at, b.run_at)) * 1000)::int8 END AS age_ms
    FROM unnest($1::text[]) AS q(name)
    LEFT JOIN buffered AS b ON b.queue_name = q.name
    CROSS JOIN LATERAL (
      WITH RECURSIVE heads AS (
        (SELECT j.priority, j.run_at, 1 AS depth FROM background_jobs AS j
         WHERE j.status = 'queued' AND j.queue_name = q.name ORDER BY j.priority DESC, j.run_at, j.id LIMIT 1)
        UNION ALL
        SELECT n.priority, n.run_at, h.depth + 1 FROM heads AS h
        CROSS JOIN LATERAL (
          SELECT j.priority, j.run_at FROM background_jobs AS j
          WHERE j.status = 'queued' AND j.queue_name = q.name AND j.priority < h.priority
          ORDER BY j.priority DESC, j.run_at, j.id LIMIT 1
        ) AS n
        WHERE h.depth < 100
      )
      SELECT min(heads.run_at) AS run_at FROM heads
    ) AS o`,

  // Final outcomes of the last hour per queue and clock minute (date_trunc: cheaper per row than numeric
  // arithmetic on an interval), from the finished_at of the
  // rows the pruner has kept: a range of the finished-jobs index (status, finished_at) per status, newest
  // first, at most $1 rows each (the caller says so when a status reaches it). Retried attempts leave no row:
  // 'failed' here is a job that used up its attempts.
  finishedPerMinute: `
    SELECT f.queue_name, f.status::text AS status, date_trunc('minute', f.finished_at) AS minute, now() AS now, count(*)::int AS n
    FROM (
      (SELECT queue_name, status, finished_at FROM background_jobs_all
       WHERE status = 'completed' AND finished_at IS NOT NULL AND finished_at >= date_trunc('minute', now()) - interval '59 minutes'
       ORDER BY finished_at DESC LIMIT $1)
      UNION ALL
      (SELECT queue_name, status, finished_at FROM background_jobs_all
       WHERE status = 'failed' AND finished_at IS NOT NULL AND finished_at >= date_trunc('minute', now()) - interval '59 minutes'
       ORDER BY finished_at DESC LIMIT $1)
    ) AS f
    GROUP BY 1, 2, 3`,

  // A queue's page (dashboard/views/queue.view.ts): its finished jobs of the last day in buckets of 5 minutes over the
  // last hour ('hour', 12 buckets) and of an hour over the day ('day', 24), each with its completed and failed counts
  // and the 50th and 95th percentiles of their last attempt's wait (due, run_at, to start, locked_at) and run (start to
  // finish). Read as the throughput chart is: a range of the finished-jobs index (status, finished_at) per status,
  // newest first, at most $2 rows each of every queue (the queue $1 is filtered after the cap, so a quiet queue beside
  // busy ones costs the cap, not the day); read_completed / read_failed say whether a cap was reached.
  queueTimes: `
    WITH raw AS MATERIALIZED (
      (SELECT queue_name, status, finished_at, locked_at, run_at FROM background_jobs_all
       WHERE status = 'completed' AND finished_at IS NOT NULL AND finished_at >= now() - interval '24 hours'
       ORDER BY finished_at DESC LIMIT $2)
      UNION ALL
      (SELECT queue_name, status, finished_at, locked_at, run_at FROM background_jobs_all
       WHERE status = 'failed' AND finished_at IS NOT NULL AND finished_at >= now() - interval '24 hours'
       ORDER BY finished_at DESC LIMIT $2)
    ), mine AS (
      SELECT status, extract(epoch FROM now() - finished_at) AS age_s,
        CASE WHEN locked_at IS NOT NULL THEN greatest(0, extract(epoch FROM locked_at - run_at) * 1000) END AS wait_ms,
        CASE WHEN locked_at IS NOT NULL THEN greatest(0, extract(epoch FROM finished_at - locked_at) * 1000) END AS run_ms
      FROM raw WHERE queue_name = $1
    ), bucketed AS (
      SELECT 'hour' AS span, floor(age_s / 300)::int AS ago, status, wait_ms, run_ms FROM mine WHERE age_s < 3600
      UNION ALL
      SELECT 'day' AS span, floor(age_s / 3600)::int AS ago, status, wait_ms, run_ms FROM mine
    )
    SELECT b.span, b.ago,
      count(*) FILTER (WHERE b.status = 'completed')::int AS completed,
      count(*) FILTER (WHERE b.status = 'failed')::int AS failed,
      percentile_cont(0.5) WITHIN GROUP (ORDER BY b.wait_ms)::float8 AS wait_p50,
      percentile_cont(0.95) WITHIN GROUP (ORDER BY b.wait_ms)::float8 AS wait_p95,
      percentile_cont(0.5) WITHIN GROUP (ORDER BY b.run_ms)::float8 AS run_p50,
      percentile_cont(0.95) WITHIN GROUP (ORDER BY b.run_ms)::float8 AS run_p95,
      (SELECT count(*) FROM raw WHERE status = 'completed')::int AS read_completed,
      (SELECT count(*) FROM raw WHERE status = 'failed')::int AS read_failed
    FROM bucketed AS b
    GROUP BY b.span, b.ago`,

  // The newest id, read from the end of the primary key: where the first page of the jobs list starts.
  maxId: `SELECT coalesce(max(id), 0)::text AS id FROM background_jobs_all`,

  // One page of the jobs list, newest first: ids below $1 and at least $2 (the scan window, so a filter that
  // matches few rows reads at most $1 - $2 index entries before the page says "go on"), queue $3 and status $4
  // when given (the status as reports show it: 'queued' includes buffered jobs), $5 rows at most; $6 adds the
  // start of the payload; $7 'due' or 'scheduled' keeps the queued jobs whose run_at has come or is ahead; $8 keeps
  // the jobs whose payload (as JSON text) or last error contains it, case-insensitively (a search: the caller
  // narrows $1..$2 to a chunk and bounds the time it goes on for).
  listJobs: listJobs('newest'),
  // The same window [$2, $1) oldest first (?order=oldest), in the order job-list-order.ts defines for every job list.
  listJobsOldest: listJobs('oldest'),

  // Per queue of $1: how many of its queued jobs wait for a later run_at (scheduled; the rest are due), counted up
  // to $2 + 1 per priority. The claim index (queue_name, priority DESC, run_at, id) WHERE status = 'queued' holds
  // each priority's scheduled jobs as one range at its end: a loose index scan finds the queue's priorities (one
  // probe each, at most 100), and each range is read up to the cap. Filtering a queue's queued entries on run_at
  // instead reads all of its due backlog to count none.
  scheduledCounts: `
    SELECT q.name AS queue_name, coalesce((
      WITH RECURSIVE prios AS (
        (SELECT j.priority, 1 AS depth FROM background_jobs AS j
         WHERE j.status = 'queued' AND j.queue_name = q.name ORDER BY j.priority DESC, j.run_at, j.id LIMIT 1)
        UNION ALL
        SELECT n.priority, p.depth + 1 FROM prios AS p
        CROSS JOIN LATERAL (
          SELECT j.priority FROM background_jobs AS j
          WHERE j.status = 'queued' AND j.queue_name = q.name AND j.priority < p.priority
          ORDER BY j.priority DESC, j.run_at, j.id LIMIT 1
        ) AS n
        WHERE p.depth < 100
      )
      SELECT sum((SELECT count(*) FROM (
        SELECT 1 FROM background_jobs AS j
        WHERE j.status = 'queued' AND j.queue_name = q.name AND j.priority = prios.priority AND j.run_at > now()
        ORDER BY j.priority DESC, j.run_at, j.id LIMIT $2::int + 1) AS s))
      FROM prios), 0)::int AS n
    FROM unnest($1::text[]) AS q(name)`,

  // The job that holds unique key $1 (queued or running: finished jobs give their key up), in queue $2 or in
  // any queue that has live jobs, through the unique-key index (queue_name, unique_key).
  findByUniqueKey: `
    SELECT ${LIST_COLUMNS}, CASE WHEN $3::boolean THEN left(j.payload::text, 160) END AS payload_preview
    FROM background_jobs AS j
    WHERE j.unique_key = $1::text AND j.status IN ('queued', 'processing')
      AND j.queue_name = ANY(CASE WHEN $2::text IS NULL THEN ${LIVE_QUEUES} ELSE ARRAY[$2::text] END)
    ORDER BY j.id DESC LIMIT 50`,

  // The whole row as JSON, so columns added by later migrations (result, progress) show without a change here.
  // With, for onConflict 'queue-after', the successor waiting for this job, or the holder this waiting successor waits
  // for (as getJob reads them: job-read.sql.ts).
  jobDetail: `
    SELECT to_jsonb(j) || jsonb_build_object(
        'successor_id', (SELECT s.job_id::text FROM background_job_successors AS s
                         WHERE j.unique_key IS NOT NULL AND j.status IN ('queued', 'processing') AND s.queue_name = j.queue_name AND s.unique_key = j.unique_key
                           AND s.job_id <> j.id),
        'waits_for_id', (SELECT h.id::text FROM background_jobs AS h
                         WHERE j.unique_key IS NOT NULL AND j.status = 'blocked' AND j.flow_id IS NULL
                           AND h.queue_name = j.queue_name AND h.unique_key = j.unique_key AND h.status IN ('queued', 'processing') LIMIT 1)) AS row,
      now() AS now
    FROM background_jobs_all AS j WHERE j.id = $1::int8`,

  // The job page's attempt history: the same read as QueueService.get's (job-read.sql.ts).
  jobAttempts: JOB_READ_SQL.jobAttempts,

  // The newest flow id, read from the end of background_flows' primary key: where the first page of flows starts.
  maxFlowId: `SELECT coalesce(max(id), 0)::text AS id FROM background_flows`,

  // One page of the flows list, newest first, as listJobs: ids below $1 and at least $2 (the scan window), status
  // $3 when given, $4 rows at most; each flow's jobs counted up to $5 + 1 (through the flow index (flow_id,
  // status)), so a page of big flows reads at most $4 * ($5 + 1) index entries.
  listFlows: `
    SELECT f.id::text AS id, f.name, f.status, f.reason, f.created_at, f.finished_at,
      (SELECT count(*)::int FROM (SELECT 1 FROM background_jobs_all AS j WHERE j.flow_id = f.id LIMIT $5 + 1) AS s) AS jobs
    FROM background_flows AS f
    WHERE f.id < $1::int8 AND f.id >= $2::int8 AND ($3::text IS NULL OR f.status = $3::text)
    ORDER BY f.id DESC LIMIT $4`,

  // A flow's row and its jobs counted by status (as reports show it), from at most $2 of its jobs: a flow's page
  // reads a bounded part of a huge flow, and says when the counts are a floor.
  flowHeader: `
    SELECT f.id::text AS id, f.name, f.status, f.reason, f.failed_job_id::text AS failed_job_id, f.created_at, f.updated_at, f.finished_at,
      (SELECT coalesce(json_object_agg(c.status, c.n), '{}') FROM (
         SELECT s.status, count(*)::int AS n FROM (
           SELECT ${shownStatus('j')}::text AS status FROM background_jobs_all AS j WHERE j.flow_id = f.id LIMIT $2) AS s
         GROUP BY s.status) AS c) AS counts
    FROM background_flows AS f WHERE f.id = $1::int8`,

  // A flow's jobs by id after $2, at most $3 (the drawing's first jobs, or a page of the table), through the flow
  // index; for a blocked one the parents it waits for (the first $4 refs, and how many). Compensation jobs are
  // jobs of the flow too (their flow_id is set): `compensates` names the job they undo. `j.id + 0`: with the id itself
  // in the condition and the order, the planner walked the primary key from the first id up to the flow's jobs (a
  // million rows before a new flow), or every flow's jobs above $2 through (status, id) (test/dashboard-plans.spec.ts);
  // this way only flow_id is indexable: it reads this flow's index entries (as many as the flow has jobs) and sorts.
  flowJobs: `
    SELECT j.id::text AS id, j.flow_ref AS ref, j.queue_name, ${shownStatus('j')}::text AS status, j.attempts, j.max_attempts,
      j.compensates::text AS compensates, j.run_at, j.finished_at, left(split_part(j.last_error, E'\\n', 1), 200) AS last_error,
      ${waitingFor('j', '$4')}
    FROM background_jobs_all AS j
    WHERE j.flow_id = $1::int8 AND j.id + 0 > $2::int8
    ORDER BY j.id + 0 LIMIT $3`,

  // The edges between the jobs of $1 (the drawn ones), at most $2: through the edges' index on child_id, each
  // child's edges tested against the drawn ids.
  flowEdges: `
    SELECT d.parent_id::text AS parent, d.child_id::text AS child, d.on_failure, d.done
    FROM background_job_deps AS d
    WHERE d.child_id = ANY($1::int8[]) AND d.parent_id = ANY($1::int8[])
    ORDER BY d.child_id, d.parent_id LIMIT $2`,

  // The job page of a flow job: its flow ($1), and, when the job ($2) is blocked, the parents it waits for (the
  // first $3 refs, and how many).
  jobFlow: `
    SELECT f.id::text AS id, f.name, f.status, j.flow_ref AS ref, ${waitingFor('j', '$3')}
    FROM background_flows AS f, background_jobs_all AS j
    WHERE f.id = $1::int8 AND j.id = $2::int8`,
} as const;
