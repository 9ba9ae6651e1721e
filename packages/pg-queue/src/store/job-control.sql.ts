// An operator's actions on one job or queue (QueueService): cancel, retry, change, pause, resume.
import { JOBS_CHANNEL } from '../pg-queue.constants.js';
import { CANCEL_CHANNEL, DONE_CHANNEL, FLOW_COLUMNS, MS, REVIEW_CHANNEL, stepFlows, stepSuccessors, SUCCESSOR_COLUMNS } from './shared.sql.js';

/**
 * The statuses in which a job may be changed after enqueue (promote, priority, run_at, payload): it has not
 * started and no worker holds it. A job read ahead into a worker's buffer (or held armed) is a 'processing' row
 * with `buffered` (docs/concepts.md, The life of a held job): its holder owns it, so it is not changed under it.
 */
export const CHANGEABLE = `('queued', 'blocked')`;

/**
 * The SET list of a change, on alias j, from parameters starting at $first: priority (NULL: kept), promote (run
 * now: run_at no later than now()), run_at (NULL: kept), delay in ms from now (NULL: kept), then a payload flag and
 * the payload (jsonb). Shared by changeJob and the command line's changeJobs (admin.sql.ts).
 */
export const changeSet = (first: number) => `
        priority = coalesce($${first}::int, j.priority),
        run_at = CASE WHEN $${first + 1}::bool THEN least(j.run_at, now())
                      WHEN $${first + 2}::timestamptz IS NOT NULL THEN $${first + 2}::timestamptz
                      WHEN $${first + 3}::int8 IS NOT NULL THEN now() + $${first + 3}::int8 ${MS}
                      ELSE j.run_at END,
        payload = CASE WHEN $${first + 4}::bool THEN $${first + 5}::jsonb ELSE j.payload END,
        updated_at = now()`;

/**
 * A job of a flow that retry() (and the bulk retry) leaves as it is: one of its parents has not completed (its edge is
 * open: the job failed or was cancelled because that parent failed or was cancelled, or because its flow failed
 * first), or is gone (pruned or deleted: the job could not read its result). Retrying the parent brings such a job
 * back, blocked, when its flow failed because of that parent (pg_queue_flow_advance). On alias `c`.
 */
export const RETRY_WAITS_FOR_PARENT = `(c.flow_id IS NOT NULL AND EXISTS (
          SELECT 1 FROM background_job_deps AS d LEFT JOIN background_jobs_all AS p ON p.id = d.parent_id
          WHERE d.child_id = c.id AND (NOT d.done OR p.id IS NULL)))`;

export const JOB_CONTROL_SQL = {
  // A queued job is cancelled outright; a running one is marked cancelled (which fences out its outcome)
  // and its worker is told through NOTIFY ("id:fence_token") to abort that claim's signal, and no later one's.
  cancelJob: `
    WITH target AS (
      SELECT id, status AS was FROM background_jobs WHERE id = $1 FOR UPDATE
    ), cancelled AS (
      UPDATE background_jobs AS j
      SET status = 'cancelled', buffered = false, finished_at = now(), lease_expires_at = NULL, updated_at = now()
      FROM target AS t
      WHERE j.id = t.id AND t.was IN ('queued', 'processing', 'blocked')
      RETURNING j.id, j.fence_token, t.was, j.awaited, ${FLOW_COLUMNS}, ${SUCCESSOR_COLUMNS}
    )
    SELECT t.was,
      (SELECT count(pg_notify('${CANCEL_CHANNEL}', c.id || ':' || c.fence_token)) FROM cancelled AS c WHERE c.was = 'processing') AS notified,
      (SELECT count(pg_notify('${DONE_CHANNEL}', c.id || ':cancelled')) FROM cancelled AS c WHERE c.awaited) AS waiters_told,
      ${stepFlows('cancelled', 'w.was::text', `'cancelled'`)} AS flows_stepped,
      ${stepSuccessors('cancelled')} AS successors_stepped,
      EXISTS (SELECT 1 FROM cancelled) AS cancelled
    FROM (SELECT was FROM target
          UNION ALL
          -- a finished job that partitioned history holds (README: "Long retention: partitioned history")
          SELECT h.status FROM background_jobs_history AS h WHERE h.id = $1 AND NOT EXISTS (SELECT 1 FROM target)) AS t`,

  // attempts starts over; fence_token is left alone, so an outcome of an attempt before the retry stays fenced. The
  // last lease's owner goes (a queued job has none: the dashboard showed the dead worker as the retried job's owner);
  // last_error stays, as the previous attempt's error, as it does through any retry until an attempt fails again.
  // A job of a failed flow brings back what failed because of it (its flow step).
  // Its recorded steps (job.step) are kept, so the retry resumes after them, unless $2 asks to reset them.
  // A job of a flow that waits for a parent (RETRY_WAITS_FOR_PARENT) is not retried: the answer names the parent.
  retryJob: `
    WITH waits AS (
      SELECT d.parent_id::text AS parent_id, p.flow_ref AS parent_ref, p.status::text AS parent_status
      FROM background_jobs AS c
      JOIN background_job_deps AS d ON d.child_id = c.id
      LEFT JOIN background_jobs_all AS p ON p.id = d.parent_id
      WHERE c.id = $1 AND c.flow_id IS NOT NULL AND c.status IN ('failed', 'cancelled') AND (NOT d.done OR p.id IS NULL)
      ORDER BY p.id IS NULL DESC, d.parent_id
      LIMIT 1
    ), retried AS (
      UPDATE background_jobs AS j
      SET status = 'queued', attempts = 0, run_at = now(), finished_at = NULL, locked_by = NULL, locked_at = NULL, lease_expires_at = NULL, updated_at = now(),
          steps = CASE WHEN $2::bool THEN NULL ELSE j.steps END
      WHERE id = $1 AND status IN ('failed', 'cancelled') AND NOT EXISTS (SELECT 1 FROM waits)
      RETURNING j.id, j.queue_name, ${FLOW_COLUMNS}
    )
    SELECT (SELECT count(pg_notify('${JOBS_CHANNEL}', queue_name)) FROM retried) AS notified, EXISTS (SELECT 1 FROM retried) AS retried,
      (SELECT parent_id FROM waits) AS parent_id, (SELECT parent_ref FROM waits) AS parent_ref, (SELECT parent_status FROM waits) AS parent_status,
      ${stepFlows('retried', `'failed'`, `'queued'`)} AS flows_stepped`,

  // Pause is shared by every instance; running jobs finish. The workers that hold jobs of the queue in their
  // buffers are told (REVIEW_CHANNEL) to start none of them and give them back. Resume wakes the workers
  // through NOTIFY.
  pauseQueue: `
    WITH paused AS (
      INSERT INTO background_queues (queue_name, paused) VALUES ($1, true)
      ON CONFLICT (queue_name) DO UPDATE SET paused = true, updated_at = now()
      RETURNING queue_name
    )
    SELECT count(pg_notify('${REVIEW_CHANNEL}', queue_name)) AS notified FROM paused`,

  resumeQueue: `
    WITH resumed AS (
      UPDATE background_queues SET paused = false, updated_at = now() WHERE queue_name = $1 AND paused RETURNING queue_name
    )
    SELECT count(pg_notify('${JOBS_CHANNEL}', queue_name)) AS notified FROM resumed`,

  pausedQueues: `SELECT queue_name FROM background_queues WHERE paused ORDER BY queue_name`,

  // promote / changePriority / changeRunAt / changeDelay / updatePayload of one job ($1 id, $2.. changeSet, $8 the
  // queue the payload was validated for, NULL: any): only while it has not started and no worker holds it
  // (CHANGEABLE), under the row's lock, so that a claim either took it before (the answer says so) or takes the
  // changed row. A job now due sooner than before wakes its queue's workers (their next wake-up may be later). `was`:
  // the status that answered (a finished job partitioned history holds answers from there).
  changeJob: `
    WITH target AS (
      SELECT id, status, buffered, run_at, queue_name FROM background_jobs WHERE id = $1 FOR UPDATE
    ), changed AS (
      UPDATE background_jobs AS j SET ${changeSet(2)}
      FROM target AS t
      WHERE j.id = t.id AND t.status IN ${CHANGEABLE} AND ($8::text IS NULL OR j.queue_name = $8::text)
      RETURNING j.queue_name, j.run_at < t.run_at AS sooner
    )
    SELECT w.was, w.buffered, w.queue_name, EXISTS (SELECT 1 FROM changed) AS changed,
      (SELECT count(pg_notify('${JOBS_CHANNEL}', c.queue_name)) FROM changed AS c WHERE c.sooner) AS notified
    FROM (SELECT t.status AS was, t.buffered, t.queue_name FROM target AS t
          UNION ALL
          SELECT h.status, false, h.queue_name FROM background_jobs_history AS h WHERE h.id = $1 AND NOT EXISTS (SELECT 1 FROM target)) AS w`,

  // The queue of a job (updatePayload validates the new payload with that queue's validator before it changes it).
  jobQueue: `SELECT queue_name FROM background_jobs_all WHERE id = $1`,
} as const;
