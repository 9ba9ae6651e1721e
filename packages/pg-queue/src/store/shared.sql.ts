// The pieces the job statements of several verb files share: notification channels, the finish notice, the flow
// step, the attempt-history CTEs, the wake-up setting and the trace column.
import { WAKE_SETTING } from '../pg-queue.constants.js';

export const CANCEL_CHANNEL = 'pg_queue_cancel';
/**
 * Told a queue name when jobs of that queue that workers may hold in their buffers were paused or rewritten
 * (replace): each holder checks what it holds with its next heartbeat, at once, and starts nothing from its
 * buffer until that check has answered.
 */
export const REVIEW_CHANNEL = 'pg_queue_review';
/**
 * Told a queue name when its limits changed (QueueService.setQueueLimits) or a partner's 429 blocked it or one of its
 * keys (RateLimitedError): every process serving the queue reads its row again at once (QueueLimitsKeeper).
 */
export const LIMITS_CHANNEL = 'pg_queue_limits';
/** Told "id:status" when a job someone waits on (awaited, set by waitFor) finishes: completed, failed or cancelled. */
export const DONE_CHANNEL = 'pg_queue_done';

/**
 * The finish notice of the rows of `cte` someone waits on, as a condition the final SELECT of a settle
 * statement carries: uncorrelated, so PostgreSQL evaluates it once per statement, after the CTE ran. It is
 * always true; for a batch nobody waits on it reads the CTE's rows once and sends nothing.
 */
export const notifyAwaited = (cte: string, status: string, where = 'true') =>
  `(SELECT count(pg_notify('${DONE_CHANNEL}', w.id || ':' || ${status})) FROM ${cte} AS w WHERE w.awaited AND ${where}) >= 0`;

/**
 * The next step of the flows of the rows of `cte` that belong to one, as an always-true condition of a statement's final
 * SELECT, like notifyAwaited: uncorrelated, evaluated once. First every row's step, in id order (pg_queue_flow_advance
 * in flow-functions.sql.ts: unblock the dependents of a completed job, apply the policies of a failed or cancelled
 * one); then, once all are done, the settle of each flow a step left possibly over (pg_queue_flow_settle), once per
 * flow: a flow settled after its first job's step could end `completed` before a later job of the same statement
 * failed it. ARRAY() runs the steps to the end before unnest hands out the first flow. The sort reads `cte` whole
 * before the first call, so the statement's own writes are all done, and visible to the VOLATILE functions. A batch
 * without flow jobs pays a scan of its CTE. `cte` returns id, flow_id, flow_ref and compensates; `oldStatus` and
 * `newStatus` are SQL over its row `w`, `where` filters them.
 */
export const stepFlows = (cte: string, oldStatus: string, newStatus: string, where = 'true') =>
  `(SELECT count(pg_queue_flow_settle(f.id)) FROM (SELECT DISTINCT f.id FROM unnest(ARRAY(
         SELECT w.flow_id FROM (SELECT * FROM ${cte} AS w WHERE w.flow_id IS NOT NULL AND ${where} ORDER BY w.id) AS w
         WHERE pg_queue_flow_advance(w.id, w.flow_id, w.flow_ref, w.compensates, ${oldStatus}, ${newStatus}))) AS f (id) ORDER BY f.id) AS f) >= 0`;

/** The columns a CTE returns for stepFlows. */
export const FLOW_COLUMNS = `j.flow_id, j.flow_ref, j.compensates`;

/**
 * The waiting successors (onConflict 'queue-after') of the unique keys of the rows of `cte` that ended (completed,
 * failed for good, cancelled, deleted), moved to queued where no live job holds the key any more
 * (pg_queue_successor_step, migration LifoQueueAfter1764700000000), as an always-true condition of a statement's final
 * SELECT, like stepFlows: uncorrelated, evaluated once, after the statement's own writes (the sort reads `cte` whole
 * first). A row without a key costs a test of its CTE row; a key without a successor, one primary-key probe of
 * background_job_successors. `cte` returns queue_name and unique_key (SUCCESSOR_COLUMNS); `where` filters its rows.
 */
export const stepSuccessors = (cte: string, where = 'true') =>
  `(SELECT count(pg_queue_successor_step(w.queue_name, w.unique_key, false))
       FROM (SELECT * FROM ${cte} AS w WHERE w.unique_key IS NOT NULL AND ${where} ORDER BY w.queue_name, w.unique_key) AS w) >= 0`;

/** The columns a CTE returns for stepSuccessors. */
export const SUCCESSOR_COLUMNS = `j.queue_name, j.unique_key`;

/**
 * The attempt-history rows of the attempts a statement ended without completing (README: "Attempt history"), as a
 * data-modifying CTE (run whether or not the statement reads it). `cte` returns id, attempts, locked_by, locked_at and
 * last_error; `where` filters its rows.
 */
export const recordAttempts = (cte: string, outcome: string, where = 'true') => `history AS (
      INSERT INTO background_job_attempts (job_id, attempt, worker, started_at, outcome, error)
      SELECT w.id, w.attempts, w.locked_by, w.locked_at, ${outcome}, w.last_error FROM ${cte} AS w WHERE ${where}
    )`;

/**
 * Deletes the attempt history of the rows `cte` deleted, as a CTE: only of those that ever failed (`had_failed`: their
 * last_error is set, as it stays from a job's first failed attempt on), so deleting jobs that never failed probes nothing.
 */
export const forgetAttempts = (cte: string) => `forgotten AS (
      DELETE FROM background_job_attempts WHERE job_id = ANY(ARRAY(SELECT w.id FROM ${cte} AS w WHERE w.had_failed))
    )`;

export const MS = `* interval '1 millisecond'`;

/**
 * The key `key` of queue `queue` (SQL expressions) is blocked by a partner's 429 now: background_queue_key_blocks'
 * primary key, one probe. Read by the claims (keyNotBlocked in claim-parts.sql.ts, the queue being $1) and by the start
 * mark and the heartbeat's check of a buffer (MUST_NOT_START in settle.sql.ts, the job's own queue).
 */
export const keyBlocked = (key: string, queue = '$1') =>
  `EXISTS (SELECT 1 FROM background_queue_key_blocks AS kb WHERE kb.queue_name = ${queue} AND kb.concurrency_key = ${key} AND kb.blocked_until > now())`;

/**
 * None of flow `flow`'s jobs can still run (queued, processing or blocked): the pruner and the history mover take a
 * finished job of a flow only then. A job of an ended flow that an operator retried runs alone, and while it runs
 * (or waits to), the flow's other jobs are what it reads (its parents' results) and what a retry of its dependents
 * needs: they stay where they are until it is final again. One probe of the flow index (flow_id, status) per row: a
 * scalar subquery, which the planner keeps per row (as NOT EXISTS it made it an anti-join over a sequential scan of
 * background_jobs in the mover's plan).
 */
export const flowAtRest = (flow: string) =>
  `(SELECT 1 FROM background_jobs AS live WHERE live.flow_id = ${flow} AND live.status IN ('queued', 'processing', 'blocked') LIMIT 1) IS NULL`;

/**
 * The new `logs` of row `j` (README: "Job logs"; migration JobLogs1764710000000) once the lines of `entry` are added,
 * as a SET expression: the row's own `logs` when `entry` (SQL over the statement's parameters) is NULL, so a batch
 * whose other jobs logged leaves the rows of those that did not as they were.
 *
 * `entry` is what the worker sends for one job: {"m": maxLines, "l": [[seq, msAgo, text], ...]}, `seq` numbering the
 * attempt's job.log() calls from 1 (lines the worker dropped past its own bound leave gaps), `msAgo` how long the line
 * waited in the worker (its monotonic clock) before the statement was built. The row keeps
 * {"lines": [{"attempt", "at", "line"}], "total", "claim", "seq"}:
 * - each line's `attempt` is the attempt the row charged for this claim (`attempts + buffered`, before the SET: the
 *   attempt that ran, as job.step() records it) and its `at` the database's clock at the write less `msAgo`;
 * - only the newest `m` lines are kept (the oldest go first); `total` counts every line ever logged, so that
 *   `total - lines` tells how many went;
 * - `claim` (the fence token of the claim that last wrote) and `seq` (the last line number it wrote) make a write sent
 *   again land once: a heartbeat whose answer was lost after its commit, or a line sent by a heartbeat and then again by
 *   the outcome, adds only numbers past `seq`. Every statement that runs this is fenced, so `j.fence_token` is the
 *   writer's claim.
 */
export const appendLogs = (entry: string) => `CASE WHEN (${entry}) IS NULL THEN j.logs ELSE (
          SELECT jsonb_build_object(
              'lines', coalesce((
                SELECT jsonb_agg(k.line ORDER BY k.n) FROM (
                  SELECT a.line, a.n FROM jsonb_array_elements(coalesce(j.logs -> 'lines', '[]'::jsonb) || f.lines) WITH ORDINALITY AS a(line, n)
                  ORDER BY a.n DESC LIMIT f.max) AS k), '[]'::jsonb),
              'total', coalesce((j.logs ->> 'total')::int8, 0) + greatest(f.seq - f.prev, 0),
              'claim', j.fence_token::text,
              'seq', greatest(f.seq, f.prev))
          FROM (
            SELECT coalesce(jsonb_agg(jsonb_build_object('attempt', j.attempts + j.buffered::int, 'at', now() - (l.v ->> 1)::int8 ${MS}, 'line', l.v -> 2)
                                      ORDER BY (l.v ->> 0)::int8) FILTER (WHERE (l.v ->> 0)::int8 > p.prev), '[]'::jsonb) AS lines,
              coalesce(max((l.v ->> 0)::int8), 0) AS seq, p.prev, p.max
            FROM (SELECT x.e, (x.e ->> 'm')::int AS max,
                    CASE WHEN j.logs ->> 'claim' = j.fence_token::text THEN coalesce((j.logs ->> 'seq')::int8, 0) ELSE 0 END AS prev
                  FROM (SELECT (${entry}) AS e) AS x) AS p
            LEFT JOIN LATERAL jsonb_array_elements(p.e -> 'l') AS l(v) ON true
            GROUP BY p.prev, p.max
          ) AS f)
        END`;

/** 5,000 years: any longer retention keeps rows forever, and now() minus it is still a valid timestamp. */
export const RETENTION_CAP_MS = 157_788_000_000_000;

/**
 * The plain inserts, each in two variants: `traced` also writes trace_context (one value for the whole call, the
 * last parameter), the enqueue's W3C trace context while an OpenTelemetry span is active. An enqueue without
 * one keeps the statement it had before tracing existed: no extra parameter, no column written.
 */
export const TRACED = { column: ', trace_context', value: (n: number) => `, $${n}::jsonb` };

/**
 * Who wakes the workers after an insert: 'trigger', the table's NOTIFY trigger (raw SQL, and enqueues in a
 * caller's transaction, whose commit only the caller sees); 'deferred', QueueService's own autocommit inserts,
 * which set WAKE_SETTING in the same statement so that the trigger skips its pg_notify, and wake the queues
 * after the commit through the WakeSender (waking/wake-sender.ts). A transaction that called pg_notify takes a
 * database-wide lock at commit and holds it until its commit record is flushed: every enqueue that notifies
 * waits for the flushes of all the others (docs/performance.md, Concurrent enqueue).
 */
export type Wake = 'trigger' | 'deferred';

/**
 * The setting, as a condition: the scalar subquery is an InitPlan, evaluated once per statement before its
 * first row (also when it inserts none), so before the AFTER STATEMENT trigger reads it; the trigger clears it
 * (migration DeferredWakeUps1764590000000). A bare set_config() in WHERE would run once per row (volatile).
 */
export const DEFER_WAKE = `(SELECT set_config('${WAKE_SETTING}', 'deferred', true)) IS NOT NULL`;
