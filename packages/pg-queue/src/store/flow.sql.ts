// The statements of flows (docs/guides/flows.md) that FlowStore runs; the SQL functions the Flows migration creates
// are in flow-functions.sql.ts. All times from the database clock.
import { LIVE } from './flow-functions.sql.js';
import { appendLogs, CANCEL_CHANNEL, DEFER_WAKE, DONE_CHANNEL, MS, RETENTION_CAP_MS, stepFlows, stepSuccessors, type Wake } from './shared.sql.js';

/**
 * The rows of a flow (or of a job's spawned children), one statement: $n.. are the columns as arrays in the jobs'
 * order, edges as [{parent, child, policy}] by position (1-based). A job with parents starts `blocked`.
 */
const FLOW_INPUT = (first: number) => `
    input AS (
      SELECT * FROM ROWS FROM (unnest($${first}::text[]), unnest($${first + 1}::text[]), jsonb_array_elements($${first + 2}::jsonb), unnest($${first + 3}::int[]),
                               unnest($${first + 4}::int[]), unnest($${first + 5}::timestamptz[]), unnest($${first + 6}::int8[]), unnest($${first + 7}::text[]),
                               unnest($${first + 8}::text[]), jsonb_array_elements($${first + 9}::jsonb), unnest($${first + 10}::boolean[]))
        WITH ORDINALITY AS t(ref, q, p, pr, ma, ra, d, ck, uk, comp, blocked, ord)
    ), seq AS (
      SELECT pg_get_serial_sequence('background_jobs', 'id')::regclass AS s
    ), ids AS MATERIALIZED (
      SELECT i.ord, nextval((SELECT s FROM seq)) AS id FROM input AS i ORDER BY i.ord
    )`;

// trace_context: a flow is one trace. Its jobs carry the enqueueFlow call's producer span, a spawned job its
// parent's context, a compensation the context of the job it undoes.
const FLOW_JOB_COLUMNS = `id, queue_name, payload, priority, max_attempts, run_at, concurrency_key, unique_key, status, flow_id, flow_ref, compensate, trace_context`;
const flowJobValues = (flowId: string, ref: string, trace: string) => `
      n.id, i.q, i.p, i.pr, i.ma, coalesce(i.ra, now() + i.d ${MS}), i.ck, i.uk,
      CASE WHEN i.blocked THEN 'blocked' ELSE 'queued' END::background_job_status, ${flowId}, ${ref}, nullif(i.comp, 'null'::jsonb), ${trace}`;

/** The edges of the flow input (`ids` by position): `edges`, the parameter of [{parent, child, policy}]. */
const flowEdges = (flowId: string, edges: string, where = '') => `
      INSERT INTO background_job_deps (flow_id, parent_id, child_id, on_failure)
      SELECT ${flowId}, p.id, c.id, e.policy
      FROM jsonb_to_recordset(${edges}::jsonb) AS e(parent int, child int, policy text)
      JOIN ids AS p ON p.ord = e.parent JOIN ids AS c ON c.ord = e.child
      ${where}`;

/**
 * enqueueFlow: the flow row, every job, every edge, in one statement ($1 name, $2.. the jobs, $13 edges, $14 the
 * trace context or NULL). `wake`: as for the plain inserts (shared.sql.ts, Wake): 'deferred' skips the insert trigger's
 * NOTIFY, and QueueService wakes the queues of the flow's unblocked jobs after the commit.
 */
function insertFlow(wake: Wake): string {
  return `
    WITH flow AS (
      INSERT INTO background_flows (name) VALUES ($1) RETURNING id
    ), ${FLOW_INPUT(2)}, jobs AS (
      INSERT INTO background_jobs (${FLOW_JOB_COLUMNS})
      SELECT ${flowJobValues('(SELECT id FROM flow)', 'i.ref', '$14::jsonb')}
      FROM input AS i JOIN ids AS n ON n.ord = i.ord${wake === 'deferred' ? `
      WHERE ${DEFER_WAKE}` : ''}
      ORDER BY i.ord
      RETURNING id
    ), edges AS (${flowEdges('(SELECT id FROM flow)', '$13')}
    )
    SELECT (SELECT id FROM flow) AS flow_id, n.id FROM ids AS n ORDER BY n.ord`;
}

/** A completion that adds children to the job's flow (see completeSpawning in FLOW_SQL). */
function completeSpawning(extraSet: string): string {
  return `
    WITH done AS (
      UPDATE background_jobs AS j
      SET status = 'completed', attempts = j.attempts + j.buffered::int, buffered = false, lease_expires_at = NULL,
          finished_at = now(), updated_at = now(), result = $4::jsonb, progress = coalesce($5::jsonb, j.progress)${extraSet}
      WHERE j.id = $2 AND j.status = 'processing' AND j.locked_by = $1 AND j.fence_token = $3::int8 AND j.flow_id IS NOT NULL
      RETURNING j.id, j.flow_id, j.flow_ref, j.compensates, coalesce(j.flow_ref, j.id::text) AS ref, j.awaited, j.trace_context, j.queue_name, j.unique_key
    ), ${FLOW_INPUT(6)}, jobs AS (
      INSERT INTO background_jobs (${FLOW_JOB_COLUMNS})
      SELECT ${flowJobValues('(SELECT flow_id FROM done)', `(SELECT ref FROM done) || '/' || i.ref`, '(SELECT trace_context FROM done)')}
      FROM input AS i JOIN ids AS n ON n.ord = i.ord
      WHERE EXISTS (SELECT 1 FROM done)
      ORDER BY i.ord
      ON CONFLICT DO NOTHING
      RETURNING id
    ), edges AS (${flowEdges('(SELECT flow_id FROM done)', '$17', 'WHERE EXISTS (SELECT 1 FROM done) AND p.id IN (SELECT id FROM jobs)')}
      RETURNING 1
    ), skipped AS (
      SELECT i.ord, i.ref, n.id FROM input AS i JOIN ids AS n ON n.ord = i.ord
      WHERE EXISTS (SELECT 1 FROM done) AND n.id NOT IN (SELECT id FROM jobs)
    ), written AS (
      -- The children and edges exist before the parent's flow step runs (else its settle could end the flow first).
      SELECT d.id, d.flow_id, d.flow_ref, d.compensates FROM done AS d
      WHERE (SELECT count(*) FROM jobs) >= 0 AND (SELECT count(*) FROM edges) >= 0
    )
    SELECT EXISTS (SELECT 1 FROM done) AS completed, (SELECT count(*)::int FROM jobs) AS spawned,
      (SELECT coalesce(json_agg(s.ref ORDER BY s.ord), '[]') FROM skipped AS s) AS duplicates,
      (SELECT count(pg_queue_flow_unblock(c.id)) FROM (
         SELECT DISTINCT c.id FROM jsonb_to_recordset($17::jsonb) AS e(parent int, child int, policy text)
         JOIN ids AS p ON p.ord = e.parent JOIN ids AS c ON c.ord = e.child
         WHERE p.id IN (SELECT id FROM skipped) AND (SELECT count(*) FROM edges) >= 0 ORDER BY c.id) AS c) AS orphans_tried,
      (SELECT count(pg_notify('${DONE_CHANNEL}', w.id || ':completed')) FROM done AS w WHERE w.awaited) AS waiters_told,
      ${stepFlows('written', `'processing'`, `'completed'`)} AS flows_stepped, ${stepSuccessors('done')} AS successors_stepped`;
}

export const FLOW_SQL = {
  insertFlow: insertFlow('trigger'),
  insertFlowWakeDeferred: insertFlow('deferred'),

  // A completion that adds children to the job's flow (job.spawn): fenced like completeJobs ($1 worker, $2 id, $3
  // token, $4 result, $5 progress); the children ($6.., refs prefixed with the parent's) and their edges ($17) are
  // inserted only when the completion was. The parent's own dependents are unblocked by its flow step as usual.
  // A child whose unique key another job took after job.spawn() checked it (spawnKeysHeld) is a duplicate: it is not
  // created (ON CONFLICT DO NOTHING: a held key never refuses the parent's completion), and the children of this
  // spawn that depended on it do not wait for it (no edge; unblocked here when it was their last one). `duplicates`
  // names them (their spawn refs), for the worker's warning.
  completeSpawning: completeSpawning(''),
  // The same, for a job that logged (job.log(): README, "Job logs"): its unwritten lines ($18: entry).
  completeSpawningWithLogs: completeSpawning(`, logs = ${appendLogs('$18::jsonb')}`),

  // job.spawn(): which of the keys ($1 queues, $2 keys, by position) a live job holds, with its id (the check that
  // refuses the spawn call; the completion treats a key taken after it as a duplicate, see completeSpawning).
  spawnKeysHeld: `
    SELECT k.ord::int AS ord, h.id::text AS holder
    FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(q, uk, ord)
    JOIN LATERAL (SELECT j.id FROM background_jobs AS j WHERE j.queue_name = k.q AND j.unique_key = k.uk AND j.status IN ('queued', 'processing') LIMIT 1) AS h ON true
    ORDER BY k.ord`,

  // The flow a running job belongs to (job.spawn checks it has one before the handler goes on).
  jobFlow: `SELECT flow_id::text AS flow_id, flow_ref FROM background_jobs WHERE id = $1`,

  // The second look after a settle committed (see FLOW_FUNCTIONS): the blocked children of the jobs it finished,
  // and their flows.
  recheckFlowJobs: `
    SELECT
      (SELECT count(*) FILTER (WHERE pg_queue_flow_unblock(c.child_id))::int FROM (
         SELECT DISTINCT d.child_id FROM background_job_deps AS d JOIN background_jobs AS b ON b.id = d.child_id
         WHERE d.parent_id = ANY($1::int8[]) AND d.done AND b.status = 'blocked') AS c) AS unblocked,
      -- Only the flows of jobs none of whose dependents can still run: one with a live dependent is not the flow's last.
      (SELECT count(pg_queue_flow_settle(f.flow_id))::int FROM (
         SELECT DISTINCT j.flow_id FROM background_jobs AS j
         WHERE j.id = ANY($1::int8[]) AND j.flow_id IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM background_job_deps AS d JOIN background_jobs AS c ON c.id = d.child_id
                           WHERE d.parent_id = j.id AND c.status IN ${LIVE})) AS f) AS settled`,

  // The sweeper's safety net, in bounded batches ($1 rows each): blocked jobs none of whose edges is open (a
  // second look that nobody took: its worker died between its commit and the look), unfinished flows none of whose
  // jobs is live, and jobs of a failing flow that went back to the queue since it failed (the sweeper requeued them).
  unblockStranded: `
    SELECT count(*) FILTER (WHERE pg_queue_flow_unblock(j.id))::int AS unblocked FROM (
      SELECT b.id FROM background_jobs AS b
      WHERE b.status = 'blocked' AND b.flow_id IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM background_job_deps AS d WHERE d.child_id = b.id AND NOT d.done)
      ORDER BY b.status, b.id
      LIMIT $1) AS j`,
  cancelInFailingFlows: `
    WITH gone AS (
      UPDATE background_jobs SET status = 'cancelled', finished_at = now(), updated_at = now(),
        last_error = 'flow ' || flow_id || ' failed: ' || coalesce((SELECT f.reason FROM background_flows AS f WHERE f.id = flow_id), '?')
      WHERE id = ANY(ARRAY(
        SELECT j.id FROM background_flows AS f JOIN background_jobs AS j ON j.flow_id = f.id
        WHERE f.finished_at IS NULL AND f.status = 'failing' AND j.compensates IS NULL AND j.status IN ('queued', 'blocked')
        LIMIT $1))
        AND status IN ('queued', 'blocked')
      RETURNING 1
    )
    SELECT count(*)::int AS cancelled FROM gone`,
  settleStranded: `
    SELECT count(pg_queue_flow_settle(f.id))::int AS settled FROM (
      SELECT f.id FROM background_flows AS f
      WHERE f.finished_at IS NULL AND NOT EXISTS (SELECT 1 FROM background_jobs AS j WHERE j.flow_id = f.id AND j.status IN ${LIVE})
      ORDER BY f.id
      LIMIT $1) AS f`,

  // getFlow: the flow, its jobs and its edges in one round trip (ids as text: bigint is wider than a JSON number).
  getFlow: `
    SELECT f.id::text AS id, f.name, f.status, f.failed_job_id::text AS failed_job_id, f.reason, f.created_at, f.updated_at, f.finished_at,
      (SELECT coalesce(json_agg(j ORDER BY j.n), '[]') FROM (
         SELECT id AS n, id::text AS id, flow_ref AS ref, queue_name AS queue, status, attempts, max_attempts AS "maxAttempts",
           last_error AS "lastError", result, compensates::text AS compensates, locked_by AS "lockedBy", buffered, run_at AS "runAt", finished_at AS "finishedAt"
         FROM background_jobs_all WHERE flow_id = f.id) AS j) AS jobs,
      (SELECT coalesce(json_agg(d), '[]') FROM (
         SELECT parent_id::text AS parent, child_id::text AS child, on_failure AS "onFailure", done FROM background_job_deps WHERE flow_id = f.id) AS d) AS edges
    FROM background_flows AS f WHERE f.id = $1`,

  flowStatus: `SELECT status, reason, finished_at FROM background_flows WHERE id = $1`,

  // cancelFlow: every job of the flow that can still run is cancelled at once (a running one's outcome is fenced out
  // and its worker told to abort it, as cancel() does); the flow ends cancelled, without compensation.
  cancelFlow: `
    WITH flow AS (
      UPDATE background_flows SET status = 'cancelled', reason = 'cancelled', finished_at = now(), updated_at = now()
      WHERE id = $1 AND finished_at IS NULL
      RETURNING id
    ), targets AS (
      SELECT j.id, j.status AS was, j.buffered FROM background_jobs AS j
      WHERE j.flow_id = (SELECT id FROM flow) AND j.status IN ${LIVE}
      ORDER BY j.id
      FOR UPDATE
    ), cancelled AS (
      UPDATE background_jobs AS j
      SET status = 'cancelled', buffered = false, finished_at = now(), lease_expires_at = NULL, updated_at = now()
      FROM targets AS t WHERE j.id = t.id
      RETURNING j.id, j.fence_token, t.was, t.buffered, j.awaited, j.queue_name, j.unique_key
    )
    SELECT EXISTS (SELECT 1 FROM flow) AS found, ${stepSuccessors('cancelled')} AS successors_stepped,
      (SELECT count(*)::int FROM cancelled) AS cancelled,
      (SELECT count(*)::int FROM cancelled WHERE was = 'processing' AND NOT buffered) AS signalled,
      (SELECT count(pg_notify('${CANCEL_CHANNEL}', c.id || ':' || c.fence_token)) FROM cancelled AS c WHERE c.was = 'processing') AS notified,
      (SELECT count(pg_notify('${DONE_CHANNEL}', c.id || ':cancelled')) FROM cancelled AS c WHERE c.awaited) AS waiters_told,
      (SELECT count(pg_notify('${DONE_CHANNEL}', 'flow:' || f.id || ':cancelled')) FROM flow AS f) AS flow_told`,

  // The finished flows of the jobs $1 (a settled batch of one worker) nobody announced yet, marked announced: one
  // 'flow-finished' event per flow, from the first worker that looks once the flow has ended (the one that ran its
  // last job, unless another worker's look after its own settle came first), with one of its jobs of that flow.
  announceFlows: `
    WITH batch AS (
      SELECT DISTINCT ON (flow_id) flow_id, id FROM background_jobs WHERE id = ANY($1::int8[]) AND flow_id IS NOT NULL ORDER BY flow_id, id DESC
    )
    UPDATE background_flows AS f SET announced = true
    FROM batch AS b
    WHERE f.id = b.flow_id AND NOT f.announced AND f.finished_at IS NOT NULL
    RETURNING f.id::text AS id, f.name, f.status, f.reason, b.id::text AS job_id`,

  // job.parents(): every parent of a job, with its outcome.
  jobParents: `
    SELECT p.id::text AS id, p.flow_ref AS ref, p.queue_name AS queue, p.status, p.result, p.last_error AS "lastError", d.on_failure AS "onFailure"
    FROM background_job_deps AS d JOIN background_jobs AS p ON p.id = d.parent_id
    WHERE d.child_id = $1
    ORDER BY p.id`,

  // job.compensating(): for a compensation job, the job it undoes, with its payload and result.
  compensatedJob: `
    SELECT o.id::text AS id, o.flow_ref AS ref, o.queue_name AS queue, o.payload, o.result
    FROM background_jobs AS c JOIN background_jobs AS o ON o.id = c.compensates
    WHERE c.id = $1`,

  // Flows for the CLI and the dashboard: newest first, optionally by status.
  listFlows: `
    SELECT f.id::text AS id, f.name, f.status, f.reason, f.created_at, f.finished_at,
      (SELECT count(*)::int FROM background_jobs_all AS j WHERE j.flow_id = f.id) AS jobs
    FROM background_flows AS f
    WHERE ($1::text IS NULL OR f.status = $1)
    ORDER BY f.id DESC
    LIMIT $2`,

  // Pruner: flows finished before the cutoff whose jobs are all gone (the pruner deletes a flow's jobs only once the
  // flow has finished), with their edges; one bounded batch per statement.
  deleteFinishedFlows: `
    WITH doomed AS (
      SELECT f.id FROM background_flows AS f
      WHERE f.finished_at < now() - least($1::int8, ${RETENTION_CAP_MS}) ${MS}
        AND NOT EXISTS (SELECT 1 FROM background_jobs_all AS j WHERE j.flow_id = f.id)
      ORDER BY f.finished_at
      LIMIT $2
    ), edges AS (
      DELETE FROM background_job_deps WHERE flow_id IN (SELECT id FROM doomed)
    ), flows AS (
      DELETE FROM background_flows WHERE id IN (SELECT id FROM doomed) RETURNING 1
    )
    SELECT count(*)::int AS deleted FROM flows`,
} as const;
