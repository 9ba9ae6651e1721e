// The SQL functions the Flows migration creates (and later migrations replace): unblocking a flow's jobs, their
// failure policies, compensation, settling the flow. Every statement that ends a job calls pg_queue_flow_step for its
// flow jobs (stepFlows in shared.sql.ts). The statements FlowStore runs: flow.sql.ts.
import { JOBS_CHANNEL } from '../pg-queue.constants.js';
import { CANCEL_CHANNEL, DONE_CHANNEL } from './shared.sql.js';

/** The statuses in which a job of a flow can still run (the flow is not over while one of its jobs is in one). */
export const LIVE = `('queued', 'processing', 'blocked')`;

/**
 * Whether flow `f` has a job that can still run: one probe of the flow index per status, the likeliest first, each
 * stopping at its first live entry. One `status IN (...)` scan read the index entries of every version a job had
 * been in before (a fan-in's 10,000 parents' 'queued' and 'processing' entries, dead until vacuumed) on each try.
 */
const flowIsLive = (f: string) =>
  `(EXISTS (SELECT 1 FROM background_jobs WHERE flow_id = ${f} AND status = 'blocked')
       OR EXISTS (SELECT 1 FROM background_jobs WHERE flow_id = ${f} AND status = 'processing')
       OR EXISTS (SELECT 1 FROM background_jobs WHERE flow_id = ${f} AND status = 'queued'))`;

/** pg_queue_flow_step's branch for retry() of a compensation (migration FlowOperatorActions1764671390000). */
const retryCompensation = (done: string) => `    ELSIF new_status = 'queued' AND old_status IN ('failed', 'cancelled') AND comp IS NOT NULL THEN
      -- retry() of a compensation of a flow that ended compensation_failed: the flow is compensating again, and its
      -- settle ends it compensated once every compensation completed (compensation_failed again if one fails).
      UPDATE background_flows SET status = 'compensating', finished_at = NULL, announced = false, updated_at = now()
      WHERE id = fid AND status = 'compensation_failed';
      ${done}
`;

/**
 * What a flow does when one of its jobs reached a final status (or was retried out of one), up to its settle: unblock
 * the dependents of a completed job, apply the policies of a failed or cancelled one, bring back what a retry brings
 * back. `done` ends the branches after which the flow cannot be over (a dependent can still run, a retry), `settle`
 * the others.
 */
const flowStepBody = (withRetryCompensation: boolean, done: string, settle: string) => `
  DECLARE
    e record;
  BEGIN
    IF new_status = 'completed' THEN
      FOR e IN UPDATE background_job_deps SET done = true WHERE parent_id = jid AND NOT done RETURNING child_id LOOP
        PERFORM pg_queue_flow_unblock(e.child_id);
      END LOOP;
      -- A job with a dependent that can still run cannot be the flow's last: no settle to try (a fan-in's parents
      -- skip it, and with it a look at the flow's jobs per parent).
      IF EXISTS (SELECT 1 FROM background_job_deps AS d JOIN background_jobs AS c ON c.id = d.child_id
                 WHERE d.parent_id = jid AND c.status IN ${LIVE}) THEN
        ${done}
      END IF;
    ELSIF new_status IN ('failed', 'cancelled') THEN
      PERFORM pg_queue_flow_job_ended(jid, fid, ref, comp, new_status = 'cancelled',
                                      CASE new_status WHEN 'failed' THEN 'failed' ELSE 'was cancelled' END);
${withRetryCompensation ? retryCompensation(done) : ''}    ELSIF new_status = 'queued' AND old_status IN ('failed', 'cancelled') THEN
      -- retry(): a failed flow runs again from this job when no other job of it failed on its own; what was failed
      -- or cancelled because of the failure comes back, blocked on its open edges.
      IF NOT EXISTS (
        SELECT 1 FROM background_jobs AS o
        WHERE o.flow_id = fid AND o.id <> jid AND o.compensates IS NULL AND o.status IN ('failed', 'cancelled')
          AND coalesce(o.last_error, '') NOT LIKE 'parent job %' AND coalesce(o.last_error, '') NOT LIKE 'flow % failed: %'
          AND (NOT EXISTS (SELECT 1 FROM background_job_deps AS d WHERE d.parent_id = o.id)
               OR EXISTS (SELECT 1 FROM background_job_deps AS d WHERE d.parent_id = o.id AND d.on_failure <> 'continue'))) THEN
        UPDATE background_flows SET status = 'running', failed_job_id = NULL, reason = NULL, finished_at = NULL, updated_at = now()
        WHERE id = fid AND status IN ('failing', 'failed');
        IF FOUND THEN
          UPDATE background_jobs SET status = 'blocked', finished_at = NULL, last_error = NULL, updated_at = now()
          WHERE flow_id = fid AND id <> jid AND compensates IS NULL AND status IN ('failed', 'cancelled')
            AND (last_error LIKE 'parent job %' OR last_error LIKE 'flow % failed: %');
          PERFORM pg_queue_flow_unblock(b.id) FROM background_jobs AS b
          WHERE b.flow_id = fid AND b.status = 'blocked' AND b.compensates IS NULL ORDER BY b.id;
        END IF;
      END IF;
      ${done}
    END IF;
    ${settle}
`;

/**
 * pg_queue_flow_step, see FLOW_FUNCTIONS: one job's step and its flow's settle. `retryCompensation` false: as the Flows
 * migration first created it (a compensation retried to completion left its flow compensation_failed); the down of
 * FlowOperatorActions1764671390000. Statements call pg_queue_flow_advance since FlowSettleAfterSteps1764760000000;
 * this one stays for an instance of an older version during a rolling upgrade.
 */
export const flowStepFunction = (retryCompensation: boolean): string =>
  `
  CREATE OR REPLACE FUNCTION pg_queue_flow_step(jid bigint, fid bigint, ref text, comp bigint, old_status text, new_status text) RETURNS boolean LANGUAGE plpgsql AS $$${flowStepBody(retryCompensation, 'RETURN true;', 'PERFORM pg_queue_flow_settle(fid);\n    RETURN true;')}  END $$`;

/**
 * pg_queue_flow_advance: pg_queue_flow_step without the settle; it answers whether the flow may now be over (settle
 * it). A statement steps every job of its flows first and then settles each flow once (stepFlows in shared.sql.ts):
 * settled after each job, a flow could end `completed` on the first job of a batch whose step leaves nothing live
 * (its dependents continue past it), before the step of a later job of the same batch failed it (the simulation's
 * seed 595149389, a bulk cancel). Migration FlowSettleAfterSteps1764760000000.
 */
export const FLOW_ADVANCE_FUNCTION = `
  CREATE OR REPLACE FUNCTION pg_queue_flow_advance(jid bigint, fid bigint, ref text, comp bigint, old_status text, new_status text) RETURNS boolean LANGUAGE plpgsql AS $$${flowStepBody(true, 'RETURN false;', 'RETURN true;')}  END $$`;

/**
 * How a dependent is unblocked exactly once, without serialising a fan-in on the dependent's row.
 *
 * A parent that finishes resolves its own edges (`done`: one row per edge, so 10,000 parents of one child write
 * 10,000 different rows and never wait on each other), then tries the child: pg_queue_flow_unblock moves it from
 * blocked to queued when none of its edges is open. The `status = 'blocked'` guard makes that move happen once,
 * whoever tries. A parent's own transaction cannot see the edges other parents resolved in transactions not yet
 * committed, so when the last two parents of a child finish at the same time, each may see the other's edge open
 * and leave the child blocked. Whoever commits last must look again after its commit: the worker does, right after
 * the settle statement returns (recheckFlowJobs, with the ids of the flow jobs that statement finished), and the
 * sweeper's pass does for every blocked job (the safety net when a worker died between its commit and its look).
 * Nobody takes a lock on the child until its last edge is resolved.
 *
 * A flow is settled the same way: the job that finishes last finds none of the flow's jobs live and finishes the
 * flow (under the flow row's lock, after a second look, so two settles cannot both finish it); the same race is
 * covered by the same second look after commit.
 */
export const FLOW_FUNCTIONS: readonly string[] = [
  `
  CREATE OR REPLACE FUNCTION pg_queue_flow_unblock(child bigint) RETURNS boolean LANGUAGE plpgsql AS $$
  DECLARE
    q text;
  BEGIN
    -- The open edge looked for is the child's last (by parent id), read backwards through the open-edges index:
    -- parents finish about in the order they were enqueued, so in a wide fan-in the last edge is open until the
    -- end, and each parent's try reads one index entry, not the resolved ones before it (dead until vacuumed).
    UPDATE background_jobs SET status = 'queued', run_at = greatest(run_at, now()), updated_at = now()
    WHERE id = child AND status = 'blocked'
      AND (SELECT d.parent_id FROM background_job_deps AS d WHERE d.child_id = child AND NOT d.done ORDER BY d.parent_id DESC LIMIT 1) IS NULL
    RETURNING queue_name INTO q;
    IF q IS NULL THEN
      RETURN false;
    END IF;
    PERFORM pg_notify('${JOBS_CHANNEL}', q);
    RETURN true;
  END $$`,
  // Finishes flow f once none of its jobs can run. A failing flow first starts the compensations of its completed
  // jobs (each compensation waits for those of every compensated job downstream of its own job: reverse order);
  // a compensating flow ends compensated, or compensation_failed when one of them did not complete.
  `
  CREATE OR REPLACE FUNCTION pg_queue_flow_settle(f bigint) RETURNS text LANGUAGE plpgsql AS $$
  DECLARE
    st text;
    made int;
  BEGIN
    SELECT status INTO st FROM background_flows WHERE id = f;
    IF st IS NULL OR st NOT IN ('running', 'failing', 'compensating') THEN
      RETURN st;
    END IF;
    IF ${flowIsLive('f')} THEN
      RETURN st;
    END IF;
    -- A second look under the flow row's lock (a newer snapshot: a settle that held the lock has committed).
    SELECT status INTO st FROM background_flows WHERE id = f FOR UPDATE;
    IF st NOT IN ('running', 'failing', 'compensating') OR ${flowIsLive('f')} THEN
      RETURN st;
    END IF;
    IF st = 'failing' THEN
      INSERT INTO background_jobs (queue_name, payload, priority, max_attempts, run_at, status, flow_id, flow_ref, compensates, trace_context)
      SELECT j.compensate ->> 'queue', coalesce(j.compensate -> 'payload', 'null'::jsonb), coalesce((j.compensate ->> 'priority')::int, 0),
             coalesce((j.compensate ->> 'maxAttempts')::int, 5), now(), 'blocked', f, 'compensate:' || coalesce(j.flow_ref, j.id::text), j.id, j.trace_context
      FROM background_jobs AS j
      WHERE j.flow_id = f AND j.status = 'completed' AND j.compensate IS NOT NULL AND j.compensates IS NULL
      ORDER BY j.id;
      GET DIAGNOSTICS made = ROW_COUNT;
      IF made > 0 THEN
        WITH RECURSIVE comp AS (
          SELECT id, compensates FROM background_jobs WHERE flow_id = f AND compensates IS NOT NULL
        ), reach (origin, node) AS (
          SELECT d.parent_id, d.child_id FROM background_job_deps AS d WHERE d.flow_id = f AND d.parent_id IN (SELECT compensates FROM comp)
          UNION
          SELECT r.origin, d.child_id FROM reach AS r JOIN background_job_deps AS d ON d.parent_id = r.node
        )
        INSERT INTO background_job_deps (flow_id, parent_id, child_id, on_failure)
        SELECT f, later.id, earlier.id, 'continue'
        FROM reach AS r JOIN comp AS earlier ON earlier.compensates = r.origin JOIN comp AS later ON later.compensates = r.node
        ON CONFLICT DO NOTHING;
        UPDATE background_flows SET status = 'compensating', updated_at = now() WHERE id = f;
        PERFORM pg_queue_flow_unblock(c.id) FROM background_jobs AS c WHERE c.flow_id = f AND c.compensates IS NOT NULL AND c.status = 'blocked' ORDER BY c.id;
        RETURN 'compensating';
      END IF;
      st := 'failed';
    ELSIF st = 'compensating' THEN
      st := CASE WHEN EXISTS (SELECT 1 FROM background_jobs WHERE flow_id = f AND compensates IS NOT NULL AND status <> 'completed')
                 THEN 'compensation_failed' ELSE 'compensated' END;
    ELSE
      st := 'completed';
    END IF;
    UPDATE background_flows SET status = st, finished_at = now(), updated_at = now() WHERE id = f;
    PERFORM pg_notify('${DONE_CHANNEL}', 'flow:' || f || ':' || st);
    RETURN st;
  END $$`,
  // A job of a flow that will not complete (failed for good, cancelled, or deleted while it could still run): its
  // dependents and its flow. `what` ends the reasons ("failed", "was cancelled", "was deleted").
  `
  CREATE OR REPLACE FUNCTION pg_queue_flow_job_ended(jid bigint, fid bigint, ref text, comp bigint, cancelled boolean, what text) RETURNS void LANGUAGE plpgsql AS $$
  DECLARE
    e record;
    failing boolean := false;
  BEGIN
    -- The flow fails with this job, unless the job is a compensation, or every one of its dependents continues
    -- without it (its failure is theirs to handle), or the flow is not running (this job ends because it failed).
    IF comp IS NULL AND (NOT EXISTS (SELECT 1 FROM background_job_deps WHERE parent_id = jid)
        OR EXISTS (SELECT 1 FROM background_job_deps WHERE parent_id = jid AND on_failure <> 'continue')) THEN
      UPDATE background_flows SET status = 'failing', failed_job_id = jid, updated_at = now(),
        reason = format('job %s (%s) %s', jid, coalesce(ref, '?'), what)
      WHERE id = fid AND status = 'running';
      failing := FOUND;
    END IF;
    FOR e IN UPDATE background_job_deps SET done = true WHERE parent_id = jid AND NOT done AND on_failure = 'continue' RETURNING child_id LOOP
      PERFORM pg_queue_flow_unblock(e.child_id);
    END LOOP;
    -- Dependents end as their policy says, naming this job; their own dependents follow, one step each.
    FOR e IN UPDATE background_jobs AS c
             SET status = CASE WHEN d.on_failure = 'cancel' OR cancelled THEN 'cancelled' ELSE 'failed' END::background_job_status,
                 finished_at = now(), updated_at = now(), last_error = format('parent job %s (%s) %s', jid, coalesce(ref, '?'), what)
             FROM background_job_deps AS d
             WHERE d.parent_id = jid AND NOT d.done AND d.on_failure <> 'continue' AND c.id = d.child_id AND c.status = 'blocked'
             RETURNING c.id, c.flow_ref, c.compensates, c.status LOOP
      PERFORM pg_queue_flow_job_ended(e.id, fid, e.flow_ref, e.compensates, e.status = 'cancelled', CASE e.status WHEN 'failed' THEN 'failed' ELSE 'was cancelled' END);
    END LOOP;
    IF failing THEN
      -- Nothing else of a failed flow starts: its queued and blocked jobs are cancelled, and so are those read ahead
      -- into a worker's buffer (their holder is told, as for cancel()); running jobs finish, and are compensated.
      FOR e IN SELECT id, fence_token FROM background_jobs
               WHERE flow_id = fid AND compensates IS NULL AND status = 'processing' AND buffered ORDER BY id FOR UPDATE LOOP
        PERFORM pg_notify('${CANCEL_CHANNEL}', e.id || ':' || e.fence_token);
      END LOOP;
      UPDATE background_jobs SET status = 'cancelled', buffered = false, lease_expires_at = NULL, finished_at = now(), updated_at = now(),
        last_error = format('flow %s failed: job %s (%s) %s', fid, jid, coalesce(ref, '?'), what)
      WHERE flow_id = fid AND compensates IS NULL AND (status IN ('queued', 'blocked') OR (status = 'processing' AND buffered));
    END IF;
  END $$`,
  // A flow's next step after one of its jobs reached a final status (or was retried out of one): called by every
  // statement that does that, for its rows of flows (stepFlows in shared.sql.ts), after its own writes (a VOLATILE
  // function sees the changes of the statement that calls it).
  flowStepFunction(true),
  // A job of a flow deleted while it could still run (a dashboard or CLI delete): to its flow, a cancelled job.
  `
  CREATE OR REPLACE FUNCTION pg_queue_flow_deleted(jid bigint, fid bigint, ref text, comp bigint) RETURNS boolean LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM pg_queue_flow_job_ended(jid, fid, ref, comp, true, 'was deleted');
    PERFORM pg_queue_flow_settle(fid);
    RETURN true;
  END $$`,
];
