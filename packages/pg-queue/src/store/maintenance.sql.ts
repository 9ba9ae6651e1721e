// Maintenance: the sweeper's rescue of expired leases, the pruner's deletes of finished jobs and expired key windows.
import { ADVISORY_LOCK, JOBS_CHANNEL } from '../pg-queue.constants.js';
import { DONE_CHANNEL, flowAtRest, forgetAttempts, MS, recordAttempts, RETENTION_CAP_MS, stepFlows, stepSuccessors } from './shared.sql.js';

/**
 * A finished row the pruner may delete: not of a flow, or of a flow that finished longer ago than the longest
 * retention among its jobs: $2 (this pass's retention) for a flow of completed jobs only, $4 (the longest of the
 * completed and the failed retention, the cap when failed jobs are kept for ever) for a flow with a failed or
 * cancelled job. So a flow's jobs go together, and retry() of a failed flow still finds its completed parents for as
 * long as the failed job is kept. And only while none of the flow's jobs can run (flowAtRest): a job an operator
 * retried after the flow ended keeps the rest of its flow until it is final again (the simulation's seed 1869304768
 * pruned a failed step while another step, retried with it, still ran). Evaluated per row only for flow jobs (OR
 * stops at the first true).
 */
export const FLOW_PRUNE_RETENTION = `CASE WHEN EXISTS (SELECT 1 FROM background_jobs_all AS x WHERE x.flow_id = f.id AND x.flow_id IS NOT NULL AND x.status IN ('failed', 'cancelled'))
                THEN greatest($2::int8, $4::int8) ELSE $2::int8 END`;
const PRUNABLE_FLOW_JOB = `(flow_id IS NULL OR EXISTS (
              SELECT 1 FROM background_flows AS f WHERE f.id = flow_id AND f.finished_at < now() - least(${FLOW_PRUNE_RETENTION}, ${RETENTION_CAP_MS}) ${MS}
                AND ${flowAtRest('f.id')}))`;

export const MAINTENANCE_SQL = {
  // Sweeper: jobs whose lease expired go back to the queue (or to failed, when that was their last attempt).
  // A buffered job (its holder died or froze before starting it) goes back as it was: uncharged, never failed,
  // its last_error kept. The advisory lock makes the pass single-instance; the lease check alone would keep it
  // correct.
  rescueExpiredLeases: `
    WITH lock AS (SELECT pg_try_advisory_xact_lock(${ADVISORY_LOCK.sweep}) AS held),
    rescued AS (
      UPDATE background_jobs
      SET status = CASE WHEN NOT buffered AND attempts >= max_attempts THEN 'failed' ELSE 'queued' END::background_job_status,
          finished_at = CASE WHEN NOT buffered AND attempts >= max_attempts THEN now() END,
          last_error = CASE WHEN buffered THEN last_error
            ELSE 'lease expired: worker ' || coalesce(locked_by, '?') || ' stopped renewing it (crashed, frozen or cut off) during attempt ' || attempts END,
          -- A buffered row never started: it was claimed, not run, so it has no attempt to record (locked_at cleared).
          locked_at = CASE WHEN buffered THEN NULL ELSE locked_at END,
          buffered = false, run_at = now(), lease_expires_at = NULL, updated_at = now()
      WHERE status = 'processing' AND lease_expires_at < now() AND (SELECT held FROM lock)
      RETURNING id, queue_name, status, awaited, flow_id, flow_ref, compensates, attempts, locked_by, locked_at, last_error, unique_key
    ), ${recordAttempts('rescued', `'lease-expired'`, 'w.locked_at IS NOT NULL')}
    SELECT (SELECT held FROM lock) AS held,
      count(*) FILTER (WHERE status = 'queued')::int AS requeued,
      count(*) FILTER (WHERE status = 'failed')::int AS failed,
      (SELECT count(pg_notify('${JOBS_CHANNEL}', q.queue_name))
       FROM (SELECT DISTINCT queue_name FROM rescued WHERE status = 'queued') AS q) AS notified,
      (SELECT count(pg_notify('${DONE_CHANNEL}', w.id || ':failed')) FROM rescued AS w WHERE w.awaited AND w.status = 'failed') AS waiters_told,
      ${stepFlows('rescued', `'processing'`, `'failed'`, `w.status = 'failed'`)} AS flows_stepped,
      ${stepSuccessors('rescued', `w.status = 'failed'`)} AS successors_stepped,
      -- Whether the flows' safety net has anything to look at (every blocked job and failing flow belongs to an
      -- unfinished flow): an app without flows pays one index probe here, not the net's statements.
      EXISTS (SELECT 1 FROM background_flows WHERE finished_at IS NULL) AS open_flows
    FROM rescued`,

  // Pruner: one bounded batch per statement keeps each transaction short; a flow's jobs go only once the flow has
  // finished longer ago than the longest retention among its jobs ($4, PRUNABLE_FLOW_JOB), all together, so no parent
  // goes while a child may read its result or a failed job of its flow may be retried; the caller loops. The batch is read
  // through the finished-jobs index (only rows past retention). Status and age are checked again in the outer
  // WHERE: a row the batch picked may have been retried while the DELETE waited on its lock, and PostgreSQL
  // re-evaluates that WHERE on the row's new version before deleting it. The retention is capped at
  // RETENTION_CAP_MS so the cutoff stays a valid timestamp (nothing finished that long ago).
  deleteFinishedBefore: `
    WITH lock AS (SELECT pg_try_advisory_xact_lock(${ADVISORY_LOCK.prune}) AS held),
    doomed AS (
      DELETE FROM background_jobs
      WHERE id = ANY(ARRAY(
          SELECT id FROM background_jobs
          WHERE status = ANY($1::background_job_status[]) AND finished_at < now() - least($2::int8, ${RETENTION_CAP_MS}) ${MS}
            AND ${PRUNABLE_FLOW_JOB}
            AND (SELECT held FROM lock)
          LIMIT $3))
        AND status = ANY($1::background_job_status[]) AND finished_at < now() - least($2::int8, ${RETENTION_CAP_MS}) ${MS}
        AND ${PRUNABLE_FLOW_JOB}
      RETURNING id, last_error IS NOT NULL AS had_failed
    ), ${forgetAttempts('doomed')}
    SELECT (SELECT held FROM lock) AS held, (SELECT count(*)::int FROM doomed) AS deleted`,

  // The sweeper's safety net for successors (onConflict 'queue-after'): every key whose successor still waits gets the
  // step the statement that ended its holder gives it (pg_queue_successor_step), in bounded batches ($1 keys): it catches
  // a holder ended by a statement that has no step (an operator's raw SQL, a flow's cancel of a queued job), and forgets
  // the rows of successors cancelled or deleted that way. A key whose holder still runs is left as it is; a row another
  // transaction holds is skipped. One probe of the unique index per waiting successor; without any, of an empty table.
  stepStrandedSuccessors: `
    SELECT count(*) FILTER (WHERE pg_queue_successor_step(s.queue_name, s.unique_key, false))::int AS promoted
    FROM (SELECT r.queue_name, r.unique_key FROM background_job_successors AS r
          WHERE NOT EXISTS (SELECT 1 FROM background_jobs AS j
                            WHERE j.queue_name = r.queue_name AND j.unique_key = r.unique_key AND j.status IN ('queued', 'processing'))
          ORDER BY r.queue_name, r.unique_key LIMIT $1) AS s`,

  // Pruner: expired uniqueForMs windows, one bounded batch per statement. held_until is checked again on the
  // row's latest version: an enqueue that took the window again meanwhile keeps it.
  deleteExpiredJobKeys: `
    WITH doomed AS (
      DELETE FROM background_job_keys AS k
      USING (SELECT queue_name, unique_key FROM background_job_keys WHERE held_until < now() ORDER BY held_until LIMIT $1) AS e
      WHERE k.queue_name = e.queue_name AND k.unique_key = e.unique_key AND k.held_until < now()
      RETURNING 1
    )
    SELECT count(*)::int AS deleted FROM doomed`,
} as const;
