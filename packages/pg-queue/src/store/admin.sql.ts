// Statements of the operator's command line (`pg-queue jobs ...`, `doctor`): listing and bulk actions by
// filter. Kept apart from the job statements (job.sql.ts and its verb files), which hold the hot path: nothing
// here runs in a worker. Every statement is bounded: keyset pages over the primary key (id > $1 ORDER BY id LIMIT n), so a bulk action
// on millions of rows is many short statements, each holding its row locks for one batch only. They are sent
// unnamed (planned per call), so PostgreSQL folds away the filters that are not given (NULL IS NULL).
import { JOBS_CHANNEL } from '../pg-queue.constants.js';
import { BRING_BACK } from './history.sql.js';
import { CHANGEABLE, changeSet, RETRY_WAITS_FOR_PARENT } from './job-control.sql.js';
import { CANCEL_CHANNEL, DONE_CHANNEL, forgetAttempts, stepFlows, stepSuccessors } from './shared.sql.js';
import { jobListKeyset, type JobListOrder } from './job-list-order.js';
import { shownStatus, shownStatusIn } from './shown-status.sql.js';

const MS = `* interval '1 millisecond'`;

/**
 * The job filter shared by every statement below, on alias j:
 * $1 after id (keyset), $2 ids (null: any), $3 queue (null: any), $4 statuses (`statusTest`), $5 created more
 * than this many ms ago (null: any time), $6 text the last error contains, case-insensitively (null: any), $8 'due'
 * (run_at reached) or 'scheduled' (run_at still ahead) (null: either). $7 is each statement's row limit.
 */
const jobFilter = (statusTest: string, keyset = 'j.id > $1::int8') => `
      ${keyset}
      AND ($2::int8[] IS NULL OR j.id = ANY($2::int8[]))
      AND ($3::text IS NULL OR j.queue_name = $3::text)
      AND ${statusTest}
      AND ($5::int8 IS NULL OR j.created_at < now() - $5::int8 ${MS})
      AND ($6::text IS NULL OR strpos(lower(j.last_error), lower($6::text)) > 0)
      AND ($8::text IS NULL OR ($8::text = 'scheduled') = (j.run_at > now()))`;

/**
 * The filter of the listing and of the actions (and of the count that announces one): $4 are statuses as reports
 * show them. A buffered job (in a worker's read-ahead buffer, not started) is queued: `cancel --status queued`
 * cancels it (its holder is told and drops it), `--status processing` leaves it; delete skips it as it skips
 * every row a worker holds.
 */
export const JOB_FILTER = jobFilter(shownStatusIn('j', '$4::background_job_status[]'));

/** One page of `pg-queue jobs list` in an order (job-list-order.ts): the filter after the cursor $1 (NULL: the first page). */
function listJobs(order: JobListOrder): string {
  const { after, orderBy } = jobListKeyset(order, '$1');
  return `
    SELECT j.id, j.queue_name, ${shownStatus('j')} AS status, j.attempts, j.max_attempts, j.priority, j.run_at, j.created_at, j.finished_at,
      left(split_part(j.last_error, E'\\n', 1), 200) AS last_error
    FROM background_jobs_all AS j
    WHERE ${jobFilter(shownStatusIn('j', '$4::background_job_status[]'), after)}
    ORDER BY ${orderBy} LIMIT $7`;
}

// The batch: up to $7 matching rows in id order, locked, so that a worker's claim or settle between the
// selection and the change cannot slip through (FOR UPDATE re-checks the filter on the row's latest version).
export const LOCKED_BATCH = `
    batch AS (
      SELECT j.id, j.queue_name, j.unique_key, j.status AS was FROM background_jobs AS j
      WHERE ${JOB_FILTER}
      ORDER BY j.id LIMIT $7
      FOR UPDATE OF j
    )`;

export const ADMIN_SQL = {
  // One page of matching jobs, newest or oldest first; the last error cut to its first line's first 200 characters.
  // Status as reports show it: a buffered job (in a worker's read-ahead buffer, not started) is queued.
  listJobsOldest: listJobs('oldest'),
  listJobsNewest: listJobs('newest'),

  // Counts matching rows one page at a time ($7 rows at most per statement); the caller goes on from last_id.
  countJobs: `
    SELECT count(*)::int AS n, max(s.id)::text AS last_id
    FROM (SELECT j.id FROM background_jobs_all AS j WHERE ${JOB_FILTER} ORDER BY j.id LIMIT $7) AS s`,

  // As retryJob (job-control.sql.ts), for a batch (the lease owner cleared, last_error kept); a job of a flow that waits for a
  // parent is skipped and named in `waiting` with that parent. A failed job's unique key may have been taken by another job since:
  // such a job is skipped (so are all but the first of the batch's jobs that share a key), not retried into
  // a unique violation that would fail the whole batch.
  retryJobs: `
    WITH ${LOCKED_BATCH}, ranked AS (
      SELECT b.id, b.queue_name, b.unique_key, row_number() OVER (PARTITION BY b.queue_name, b.unique_key ORDER BY b.id) AS rn FROM batch AS b
    ), waiting AS (
      -- Jobs of flows that wait for a parent (RETRY_WAITS_FOR_PARENT): skipped, each named with that parent.
      SELECT c.id, (SELECT d.parent_id FROM background_job_deps AS d LEFT JOIN background_jobs_all AS p ON p.id = d.parent_id
                    WHERE d.child_id = c.id AND (NOT d.done OR p.id IS NULL) ORDER BY d.parent_id LIMIT 1) AS parent_id
      FROM background_jobs AS c JOIN batch AS b ON b.id = c.id
      WHERE ${RETRY_WAITS_FOR_PARENT}
    ), retried AS (
      UPDATE background_jobs AS j
      SET status = 'queued', attempts = 0, run_at = now(), finished_at = NULL, locked_by = NULL, locked_at = NULL, lease_expires_at = NULL, updated_at = now()
      FROM ranked AS r
      WHERE j.id = r.id
        AND (r.unique_key IS NULL OR (r.rn = 1 AND NOT EXISTS (
          SELECT 1 FROM background_jobs AS h
          WHERE h.queue_name = r.queue_name AND h.unique_key = r.unique_key AND h.status IN ('queued', 'processing'))))
        AND NOT EXISTS (SELECT 1 FROM waiting AS w WHERE w.id = j.id)
      RETURNING j.id, j.queue_name, j.flow_id, j.flow_ref, j.compensates
    )
    SELECT (SELECT count(*)::int FROM batch) AS seen, (SELECT max(id)::text FROM batch) AS last_id,
      (SELECT count(*)::int FROM retried) AS changed, ${stepFlows('retried', `'failed'`, `'queued'`)} AS flows_stepped,
      (SELECT coalesce(json_agg(json_build_object('id', w.id::text, 'parent', w.parent_id::text) ORDER BY w.id), '[]') FROM waiting AS w) AS waiting,
      (SELECT count(pg_notify('${JOBS_CHANNEL}', q.queue_name)) FROM (SELECT DISTINCT queue_name FROM retried) AS q) AS notified`,

  // As cancelJob (job-control.sql.ts), for a batch: running jobs' workers are told through NOTIFY to abort that claim.
  cancelJobs: `
    WITH ${LOCKED_BATCH}, cancelled AS (
      UPDATE background_jobs AS j
      SET status = 'cancelled', buffered = false, finished_at = now(), lease_expires_at = NULL, updated_at = now()
      FROM batch AS b
      WHERE j.id = b.id AND b.was IN ('queued', 'processing')
      RETURNING j.id, j.fence_token, b.was, j.awaited, j.flow_id, j.flow_ref, j.compensates, j.queue_name, j.unique_key
    )
    SELECT (SELECT count(*)::int FROM batch) AS seen, (SELECT max(id)::text FROM batch) AS last_id,
      (SELECT count(*)::int FROM cancelled) AS changed, ${stepFlows('cancelled', 'w.was::text', `'cancelled'`)} AS flows_stepped,
      ${stepSuccessors('cancelled')} AS successors_stepped,
      (SELECT count(pg_notify('${CANCEL_CHANNEL}', c.id || ':' || c.fence_token)) FROM cancelled AS c WHERE c.was = 'processing') AS notified,
      -- waitFor() of a cancelled job answers at once, as after cancel(id) (the simulation's wait.not-woken found it missing)
      (SELECT count(pg_notify('${DONE_CHANNEL}', c.id || ':cancelled')) FROM cancelled AS c WHERE c.awaited) AS waiters_told`,

  // As changeJob (job-control.sql.ts), for a batch ($9.. changeSet): `pg-queue jobs promote`, `set-priority`,
  // `delay`, the dashboard's Run now. A job read ahead into a worker's buffer matches --status queued but its holder
  // owns it: seen, not changed. A promote changes (and counts) only the jobs that wait for a later run_at.
  changeJobs: `
    WITH ${LOCKED_BATCH}, changed AS (
      UPDATE background_jobs AS j SET ${changeSet(9)}
      FROM batch AS b
      WHERE j.id = b.id AND b.was IN ${CHANGEABLE} AND (NOT $10::bool OR j.run_at > now())
      RETURNING j.queue_name, j.run_at <= now() AS due
    )
    SELECT (SELECT count(*)::int FROM batch) AS seen, (SELECT max(id)::text FROM batch) AS last_id,
      (SELECT count(*)::int FROM changed) AS changed,
      (SELECT count(pg_notify('${JOBS_CHANNEL}', q.queue_name)) FROM (SELECT DISTINCT queue_name FROM changed WHERE due) AS q) AS notified`,

  // Partitioned history (README: "Long retention: partitioned history"): the failed and cancelled jobs of one batch
  // that history holds go back to background_jobs as they are, in the caller's transaction, where retryJobs then
  // takes them like any other (history.sql.ts's bringBack, for a filter).
  bringBackJobs: `
    WITH target AS (
      SELECT j.id, j.flow_id FROM background_jobs_history AS j
      WHERE ${JOB_FILTER} AND j.status IN ('failed', 'cancelled')
      ORDER BY j.id LIMIT $7
    ), ${BRING_BACK}
    SELECT count(*)::int AS n FROM returned`,

  // The finished jobs of one batch that history holds, deleted with their attempt history; $9 bounds the ids (the last
  // id of a full batch of deleteJobs, so both tables' batches end at the same id). A job of a flow is in history only
  // once its flow has finished: nothing to tell the flow.
  deleteHistoryJobs: `
    WITH deleted AS (
      DELETE FROM background_jobs_history AS h
      WHERE h.id = ANY(ARRAY(
        SELECT j.id FROM background_jobs_history AS j
        WHERE ${JOB_FILTER} AND ($9::int8 IS NULL OR j.id <= $9::int8)
        ORDER BY j.id LIMIT $7))
      RETURNING h.id, h.last_error IS NOT NULL AS had_failed
    ), ${forgetAttempts('deleted')}
    SELECT count(*)::int AS changed, max(id)::text AS last_id FROM deleted`,

  // Running jobs are never deleted (the caller leaves 'processing' out of $4): cancel them first.
  deleteJobs: `
    WITH ${LOCKED_BATCH}, deleted AS (
      DELETE FROM background_jobs AS j USING batch AS b WHERE j.id = b.id AND b.was <> 'processing'
      RETURNING j.id, b.was, j.flow_id, j.flow_ref, j.compensates, j.last_error IS NOT NULL AS had_failed, j.queue_name, j.unique_key
    ), ${forgetAttempts('deleted')}
    SELECT (SELECT count(*)::int FROM batch) AS seen, (SELECT max(id)::text FROM batch) AS last_id,
      (SELECT count(*)::int FROM deleted) AS changed,
      -- a deleted holder or successor of a unique key (onConflict 'queue-after'): the successor goes on, or is forgotten
      ${stepSuccessors('deleted')} AS successors_stepped,
      -- a deleted job of a flow that could still run is, to its flow, a cancelled one
      (SELECT count(pg_queue_flow_deleted(w.id, w.flow_id, w.flow_ref, w.compensates))
       FROM (SELECT * FROM deleted AS w WHERE w.flow_id IS NOT NULL AND w.was IN ('queued', 'blocked') ORDER BY w.id) AS w) AS flows_stepped`,

  // doctor: the queue's indexes and whether each is valid (a CREATE INDEX CONCURRENTLY that failed leaves an
  // INVALID one, which costs writes and serves no read).
  queueIndexes: `
    SELECT c.relname AS name, i.indisvalid AS valid
    FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
    WHERE i.indrelid IN (to_regclass('background_jobs'), to_regclass('background_job_keys'), to_regclass('background_queues'),
                         to_regclass('background_schedules'), to_regclass('background_queue_starts'),
                         to_regclass('background_flows'), to_regclass('background_job_deps'), to_regclass('background_job_attempts'),
                         to_regclass('background_instances'), to_regclass('background_jobs_history'))
    ORDER BY c.relname`,

  // doctor: the storage parameters of background_jobs (autovacuum_* among them), null when the table is missing.
  jobsTableOptions: `
    SELECT c.reloptions AS options FROM pg_class AS c WHERE c.oid = to_regclass('background_jobs')`,

  // doctor: in-flight jobs whose lease ended more than $1 ms ago (the sweeper should have put them back by
  // then), read through the in-flight index; counted up to $2; `buffered`: how many of them never started
  // (claimed into a worker's read-ahead buffer).
  stuckLeases: `
    SELECT count(*)::int AS n, count(*) FILTER (WHERE s.buffered)::int AS buffered, min(s.lease_expires_at) AS oldest FROM (
      -- buffered read through to_jsonb: doctor also runs on a schema whose BufferedJobs migration is pending.
      SELECT j.lease_expires_at, coalesce((to_jsonb(j) ->> 'buffered')::boolean, false) AS buffered FROM background_jobs AS j
      WHERE j.status = 'processing' AND j.lease_expires_at < now() - $1::int8 ${MS}
      LIMIT $2
    ) AS s`,

  // `pg-queue enqueue`: the SQL functions of migration SqlEnqueue1764640000000 (docs/guides/sql-enqueue.md), which
  // check the options and insert, so that the command and every SQL producer share one path. Options by name, an
  // absent one NULL (the functions' default). A job without unique options: pg_queue_enqueue; with: _unique.
  enqueueJob: `
    SELECT pg_queue_enqueue(queue => $1::text, payload => $2::jsonb, run_at => $3::timestamptz, delay_ms => $4::int8, priority => $5::int,
                            max_attempts => $6::int, concurrency_key => $7::text, lifo => $8::boolean)::text AS id`,
  enqueueUniqueJob: `
    SELECT e.id::text AS id, e.duplicate, e.replaced
    FROM pg_queue_enqueue_unique(queue => $1::text, payload => $2::jsonb, run_at => $3::timestamptz, delay_ms => $4::int8, priority => $5::int,
                                 max_attempts => $6::int, concurrency_key => $7::text, unique_key => $9::text, on_conflict => $10::text,
                                 unique_for_ms => $11::int8, lifo => $8::boolean) AS e`,

  // doctor: which server process (backend) answers; two clients answered by one process sit behind a pooler.
  backendPid: `SELECT pg_backend_pid() AS pid`,
  // Which of the ids given to a bulk command exist (at most the few an operator types).
  existingIds: `SELECT id::text FROM background_jobs_all WHERE id = ANY($1::int8[])`,
  // What `pg-queue prune` would delete (its --dry-run and its question), counted up to $3 per kind: the pruner's own
  // conditions ($1 completed, $2 failed and cancelled retention in ms, NULL: kept for ever), through the
  // finished-jobs index.
  countPrunable: `
    SELECT
      (SELECT count(*) FROM (SELECT 1 FROM background_jobs WHERE status = 'completed' AND finished_at < now() - $1::int8 ${MS} LIMIT $3) AS c)::int AS completed,
      (SELECT count(*) FROM (SELECT 1 FROM background_jobs WHERE $2::int8 IS NOT NULL AND status IN ('failed', 'cancelled')
                               AND finished_at < now() - $2::int8 ${MS} LIMIT $3) AS f)::int AS failed`,
} as const;
