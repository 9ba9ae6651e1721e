// Enqueue: the plain inserts (one job, many, many of one queue), each with and without a trace and a deferred
// wake-up; the eager start's insert; the deferred wake-up itself. Jobs with a unique key: enqueue-keyed.sql.ts.
import { JOBS_CHANNEL, WAKE_SETTING } from '../pg-queue.constants.js';
import { queuedPriorities } from './claim.sql.js';
import { DEFER_WAKE, LIMITS_CHANNEL, MS, TRACED, type Wake } from './shared.sql.js';

function insertJob(traced: boolean, wake: Wake): string {
  if (wake === 'deferred') {
    // INSERT ... SELECT to carry the condition; the casts VALUES would have taken from the columns.
    return `
    INSERT INTO background_jobs (queue_name, payload, priority, max_attempts, run_at, concurrency_key${traced ? TRACED.column : ''})
    SELECT $1::text, $2::jsonb, $3::int, $4::int, coalesce($5::timestamptz, now() + $6::int8 ${MS}), $7::text${traced ? TRACED.value(8) : ''}
    WHERE ${DEFER_WAKE}
    RETURNING id`;
  }
  return `
    INSERT INTO background_jobs (queue_name, payload, priority, max_attempts, run_at, concurrency_key${traced ? TRACED.column : ''})
    VALUES ($1, $2::jsonb, $3, $4, coalesce($5::timestamptz, now() + $6::int8 ${MS}), $7::text${traced ? TRACED.value(8) : ''})
    RETURNING id`;
}

// The common enqueue: no priority, run_at, delay, concurrency key or trace. Three parameters, the other columns their
// defaults (priority 0, run_at now()): PostgreSQL binds and evaluates less per call (measured with one caller on one
// connection, fsync off so that the statement's own cost shows: 8-9% more calls/s than insertJob's seven parameters
// and coalesce; docs/performance.md, Enqueue against the plain loop).
function insertJobPlain(wake: Wake): string {
  if (wake === 'deferred') {
    return `
    INSERT INTO background_jobs (queue_name, payload, max_attempts)
    SELECT $1::text, $2::jsonb, $3::int
    WHERE ${DEFER_WAKE}
    RETURNING id`;
  }
  return `
    INSERT INTO background_jobs (queue_name, payload, max_attempts) VALUES ($1, $2::jsonb, $3)
    RETURNING id`;
}

/**
 * Eager start (QueueService.enqueue, QueueWorker.eagerSlotFree and startEagerly): one job inserted already claimed by a
 * worker of this process that has a free slot, so that it starts when the insert returns: one statement, one WAL
 * flush and no NOTIFY, where the usual path takes the insert, the NOTIFY and the claim's own round trip and flush.
 * A job with attempts to spare is inserted started, as a claim into a free slot makes it (processing, charged, fence
 * token 1, the full lease $7): it starts when the answer arrives, one round trip in all. One on its last attempt
 * (max_attempts 1) is inserted as a claim into the read-ahead buffer would make it (`buffered`, uncharged, the
 * buffer's short lease $6) and starts through the start mark (markStarted), a second round trip: an insert that
 * commits but whose answer never reaches this process then leaves a row the sweeper soon puts back uncharged, never
 * one that is dead-lettered without having run (issue 39 item 7). With attempts to spare, a lost answer costs the
 * attempt, as a claim's lost answer does. The statement claims it only
 * when the claim itself would have taken it: the queue is not paused, and no due queued job of its priority or higher waits before it (the claim index walked one priority at a time,
 * as dueCandidates does, one probe each; rows locked by other claims count as waiting). Otherwise the job goes in
 * `queued` as any other and the trigger sends its NOTIFY; a claimed one sets WAKE_SETTING so that the trigger
 * wakes nobody for a job already taken. Parameters: queue, payload, priority, max_attempts, worker id, the buffer's
 * lease ms, the full lease ms (and the trace context), the worker's copy of the queue's stored limits.
 */
function insertEagerJob(traced: boolean): string {
  return `
    WITH RECURSIVE priorities AS (
      ${queuedPriorities('$3')}
    ), eager AS (
      -- Nor when the queue's stored limits are not those the worker knows (${traced ? '$9' : '$8'}: its copy, as a claim's; queueStopped):
      -- a worker that believed the queue unlimited would start it outside the limits.
      SELECT NOT EXISTS (SELECT 1 FROM background_queues WHERE queue_name = $1 AND (paused OR blocked_until > now()))
        AND (SELECT limits FROM background_queues WHERE queue_name = $1) IS NOT DISTINCT FROM ${traced ? '$9' : '$8'}::jsonb
        AND NOT EXISTS (
          SELECT 1 FROM priorities AS p
          WHERE (SELECT j.run_at FROM background_jobs AS j
                 WHERE j.queue_name = $1 AND j.status = 'queued' AND j.priority = p.priority ORDER BY j.run_at, j.id LIMIT 1) <= now()
        ) AS claimed
    )
    INSERT INTO background_jobs AS j (queue_name, payload, priority, max_attempts, status, attempts, buffered, fence_token, locked_by, locked_at, lease_expires_at${traced ? TRACED.column : ''})
    SELECT $1::text, $2::jsonb, $3::int, $4::int,
      CASE WHEN e.claimed THEN 'processing' ELSE 'queued' END::background_job_status,
      (e.claimed AND $4::int > 1)::int, e.claimed AND $4::int <= 1, e.claimed::int,
      CASE WHEN e.claimed THEN $5::text END, CASE WHEN e.claimed THEN now() END,
      CASE WHEN e.claimed THEN now() + (CASE WHEN $4::int > 1 THEN $7 ELSE $6 END)::int ${MS} END${traced ? TRACED.value(8) : ''}
    FROM eager AS e
    -- An InitPlan, run once before the first row and so before the AFTER STATEMENT trigger reads it (see DEFER_WAKE).
    WHERE (SELECT set_config('${WAKE_SETTING}', CASE WHEN claimed THEN 'deferred' ELSE '' END, true) FROM eager) IS NOT NULL
    -- The claim's columns (ClaimRow): created_at equals run_at, and the job waited 0 ms from due to claimed.
    RETURNING j.id, j.status = 'processing' AS claimed, CASE WHEN j.status = 'processing' THEN j.payload END AS payload, j.attempts + j.buffered::int AS attempts, j.fence_token,
      j.max_attempts, j.priority, j.buffered, date_part('epoch', j.run_at) * 1000 AS run_at_ms, NULL::float8 AS created_at_ms,
      0::float8 AS wait_ms, j.trace_context, true AS keyless`;
}

// One statement for any number of jobs: arrays in, one round trip and one NOTIFY per queue. The payloads
// travel as one JSON array ($2), not a jsonb[] literal: no array escaping of every payload in Node and no
// array parsing in PostgreSQL (5-10% more rows/s for calls of 1,000). ROWS FROM zips the columns in order.
function insertJobs(traced: boolean, wake: Wake): string {
  return `
    INSERT INTO background_jobs (queue_name, payload, priority, max_attempts, run_at, concurrency_key${traced ? TRACED.column : ''})
    SELECT q, p, pr, ma, coalesce(ra, now() + d ${MS}), ck${traced ? TRACED.value(8) : ''}
    FROM ROWS FROM (unnest($1::text[]), jsonb_array_elements($2::jsonb), unnest($3::int[]), unnest($4::int[]),
                    unnest($5::timestamptz[]), unnest($6::int8[]), unnest($7::text[])) WITH ORDINALITY
      AS t(q, p, pr, ma, ra, d, ck, ord)${wake === 'deferred' ? `
    WHERE ${DEFER_WAKE}` : ''}
    ORDER BY ord
    RETURNING id`;
}

// The common enqueueMany: every job to one queue with the same options. Scalars instead of five arrays of
// copies: 20-40% more rows/s for calls of 1,000 (no array building in Node, no array parsing in PostgreSQL).
function insertUniformJobs(traced: boolean, wake: Wake): string {
  return `
    INSERT INTO background_jobs (queue_name, payload, priority, max_attempts, run_at, concurrency_key${traced ? TRACED.column : ''})
    SELECT $1, p, $3, $4, coalesce($5::timestamptz, now() + $6::int8 ${MS}), $7::text${traced ? TRACED.value(8) : ''}
    FROM jsonb_array_elements($2::jsonb) WITH ORDINALITY AS t(p, ord)${wake === 'deferred' ? `
    WHERE ${DEFER_WAKE}` : ''}
    ORDER BY ord
    RETURNING id`;
}

/**
 * The queues of a call's LIFO jobs (`$1` queues, `lifo` the array of flags) marked as having LIFO jobs
 * (background_queues.lifo_jobs), as a CTE `flagged` (the queues it marked now) to put first in a WITH: from then on their
 * workers claim with the variant that takes LIFO jobs first (ClaimOrder in claim.sql.ts), told by a NOTIFY on
 * pg_queue_limits from the statement that marked the queue. A queue marked already is only read (the NOT EXISTS):
 * concurrent LIFO enqueues of one queue never lock its row after the first.
 */
const flagLifoQueues = (queues: string, lifo: string) => `flagged AS (
      INSERT INTO background_queues AS b (queue_name, lifo_jobs)
      SELECT DISTINCT t.q, true FROM unnest(${queues}, ${lifo}) AS t(q, lf)
      WHERE t.lf AND NOT EXISTS (SELECT 1 FROM background_queues AS m WHERE m.queue_name = t.q AND m.lifo_jobs)
      ON CONFLICT (queue_name) DO UPDATE SET lifo_jobs = true, updated_at = now() WHERE b.lifo_jobs IS NOT TRUE
      RETURNING b.queue_name
    )`;

/**
 * Jobs of which some were enqueued with `lifo: true` (README, LIFO), without a unique key: insertJobs with one more
 * array ($8, the flags; the trace context is $9), the LIFO rows' `lifo` set (a FIFO row's stays NULL), and their queues
 * marked (flagLifoQueues). Any number of rows, one of them too (enqueue). Calls without a LIFO job keep the statements
 * above. The ids in input order (the CTE's rows come out in the order the INSERT wrote them).
 */
function insertLifoJobs(traced: boolean, wake: Wake): string {
  return `
    WITH ${flagLifoQueues('$1::text[]', '$8::bool[]')}, inserted AS (
      INSERT INTO background_jobs (queue_name, payload, priority, max_attempts, run_at, concurrency_key, lifo${traced ? TRACED.column : ''})
      SELECT q, p, pr, ma, coalesce(ra, now() + d ${MS}), ck, CASE WHEN lf THEN true END${traced ? TRACED.value(9) : ''}
      FROM ROWS FROM (unnest($1::text[]), jsonb_array_elements($2::jsonb), unnest($3::int[]), unnest($4::int[]),
                      unnest($5::timestamptz[]), unnest($6::int8[]), unnest($7::text[]), unnest($8::bool[])) WITH ORDINALITY
        AS t(q, p, pr, ma, ra, d, ck, lf, ord)${wake === 'deferred' ? `
      WHERE ${DEFER_WAKE}` : ''}
      ORDER BY ord
      RETURNING id
    )
    SELECT id FROM inserted WHERE (SELECT count(pg_notify('${LIMITS_CHANNEL}', f.queue_name)) FROM flagged AS f) >= 0`;
}

export const ENQUEUE_SQL = {
  insertJob: insertJob(false, 'trigger'),
  insertJobPlain: insertJobPlain('trigger'),
  insertJobs: insertJobs(false, 'trigger'),
  insertUniformJobs: insertUniformJobs(false, 'trigger'),
  insertJobTraced: insertJob(true, 'trigger'),
  insertJobsTraced: insertJobs(true, 'trigger'),
  insertUniformJobsTraced: insertUniformJobs(true, 'trigger'),
  // The same inserts with the wake-up deferred (see Wake): QueueService's enqueues without a caller's transaction.
  insertJobWakeDeferred: insertJob(false, 'deferred'),
  insertJobPlainWakeDeferred: insertJobPlain('deferred'),
  insertJobsWakeDeferred: insertJobs(false, 'deferred'),
  insertUniformJobsWakeDeferred: insertUniformJobs(false, 'deferred'),
  insertJobTracedWakeDeferred: insertJob(true, 'deferred'),
  insertJobsTracedWakeDeferred: insertJobs(true, 'deferred'),
  insertUniformJobsTracedWakeDeferred: insertUniformJobs(true, 'deferred'),
  // Jobs of which some are LIFO: see insertLifoJobs.
  insertLifoJobs: insertLifoJobs(false, 'trigger'),
  insertLifoJobsTraced: insertLifoJobs(true, 'trigger'),
  insertLifoJobsWakeDeferred: insertLifoJobs(false, 'deferred'),
  insertLifoJobsTracedWakeDeferred: insertLifoJobs(true, 'deferred'),
  // The keyed jobs of a call with a LIFO job or an onConflict 'queue-after' (enqueue.store.ts, insertKeyedJobs): the SQL
  // enqueue function's body (migration LifoQueueAfter1764700000000), which handles both; one row per job, in order.
  enqueueJobsFunction: `SELECT e.id::text AS id, e.outcome FROM pg_queue_enqueue_jobs($1::jsonb, 'pg_queue_enqueue_many') AS e`,
  // Eager start: see insertEagerJob.
  insertEagerJob: insertEagerJob(false),
  insertEagerJobTraced: insertEagerJob(true),
  // The deferred wake-up itself (WakeSender), one statement for every queue enqueued since the last one. A
  // transaction that wrote nothing else commits without waiting for a WAL flush (PostgreSQL flushes at commit
  // only when the transaction wrote WAL before its commit record), so it holds the NOTIFY commit lock for
  // microseconds (measured: docs/performance.md, Concurrent enqueue).
  wakeQueues: `SELECT count(pg_notify('${JOBS_CHANNEL}', q)) AS notified FROM unnest($1::text[]) AS q`,
} as const;
