// Every SQL statement of the queue, in one place. Named statements are prepared once per connection by
// node-postgres and reused (except PLANNED_PER_CALL below); all times come from the database clock (now(),
// clock_timestamp()).
import { ADVISORY_LOCK, JOBS_CHANNEL, LIMIT_LOCK_SPACE, WAKE_SETTING } from '../pg-queue.constants.js';

export const CANCEL_CHANNEL = 'pg_queue_cancel';
/**
 * Told a queue name when jobs of that queue that workers may hold in their buffers were paused or rewritten
 * (replace): each holder checks what it holds with its next heartbeat, at once, and starts nothing from its
 * buffer until that check has answered.
 */
export const REVIEW_CHANNEL = 'pg_queue_review';
/** Told "id:status" when a job someone waits on (awaited, set by waitFor) finishes: completed, failed or cancelled. */
export const DONE_CHANNEL = 'pg_queue_done';

/**
 * The finish notice of the rows of `cte` someone waits on, as a condition the final SELECT of a settle
 * statement carries: uncorrelated, so PostgreSQL evaluates it once per statement, after the CTE ran. It is
 * always true; for a batch nobody waits on it reads the CTE's rows once and sends nothing.
 */
const notifyAwaited = (cte: string, status: string, where = 'true') =>
  `(SELECT count(pg_notify('${DONE_CHANNEL}', w.id || ':' || ${status})) FROM ${cte} AS w WHERE w.awaited AND ${where}) >= 0`;

/**
 * The next step of the flows of the rows of `cte` that belong to one (pg_queue_flow_step in flow.sql.ts: unblock the
 * dependents of a completed job, apply the policies of a failed or cancelled one, settle the flow), as an always-true
 * condition of a statement's final SELECT, like notifyAwaited: uncorrelated, evaluated once. The sort reads `cte`
 * whole before the first call, so the statement's own writes are all done, and visible to the VOLATILE function. A
 * batch without flow jobs pays a scan of its CTE. `cte` returns id, flow_id, flow_ref and compensates; `oldStatus` and
 * `newStatus` are SQL over its row `w`, `where` filters them.
 */
export const stepFlows = (cte: string, oldStatus: string, newStatus: string, where = 'true') =>
  `(SELECT count(pg_queue_flow_step(w.id, w.flow_id, w.flow_ref, w.compensates, ${oldStatus}, ${newStatus}))
       FROM (SELECT * FROM ${cte} AS w WHERE w.flow_id IS NOT NULL AND ${where} ORDER BY w.id) AS w) >= 0`;

/**
 * A claimed row's created_at as epoch milliseconds, or NULL when it equals run_at (a job enqueued to run at once:
 * the worker takes run_at_ms). Most rows skip the second conversion: 2% of the claim's server time.
 */
const CREATED_AT_MS = `CASE WHEN j.created_at <> j.run_at THEN date_part('epoch', j.created_at) * 1000 END AS created_at_ms`;

/** The columns a CTE returns for stepFlows. */
const FLOW_COLUMNS = `j.flow_id, j.flow_ref, j.compensates`;

/**
 * The ids of a batch settle ($2) that `cte` did not settle (fenced out: normally none), as rows (id, false). When the
 * CTE holds as many rows as $2 has ids, every id was settled (the CTE's ids are distinct and all in $2), and the
 * count, a one-time filter, skips the anti-join: building and probing its hash was 0.25 µs of the 4.4 µs a completed
 * row cost the server in batches of 300. The statement's side effects (notifyAwaited, stepFlows) ride the other
 * branch of its UNION ALL, whose one-time filter is always true, so they run whether this gate opens or not.
 */
const REFUSED = (cte: string) => `SELECT id, false AS flow FROM unnest($2::int8[]) AS s(id)
    WHERE (SELECT count(*) FROM ${cte}) < cardinality($2::int8[]) AND id NOT IN (SELECT id FROM ${cte})`;

/**
 * The fence of a batch settle (see completeJobs below): each row's fence_token must be the one its holder claimed.
 * $4 is that token when every job of the batch carries the same one (the common case: all on their first claim),
 * else NULL and $3 holds {"id": token} to look up per row. COALESCE evaluates the lookup only when $4 is NULL: the
 * lookup (id to text, a search of the JSON object, text to int8) was 0.3-0.5 µs of the 4.5-5.8 µs a completed row
 * cost the server, against a comparison with one parameter.
 */
const BATCH_FENCE = `j.fence_token = coalesce($4::int8, ($3::jsonb ->> j.id::text)::int8)`;

/**
 * "Still held by this worker" ($1): in processing and locked by it, in the statements that settle or renew a batch
 * of ids (up to a thousand). Written with IS NOT DISTINCT FROM, not `=` (the same here: status is never null and
 * neither is $1), because no index can serve it: the batch's ids drive the lookup, one primary-key probe each.
 * With `=`, PostgreSQL 15 read "this worker's rows in processing" off background_jobs_in_flight_idx (locked_by, id)
 * WHERE status = 'processing' by locked_by alone (18 probes it with both keys) whenever statistics taken before the
 * worker existed promised a handful of its rows, as they always do for a new process. That bitmap scan returns an
 * entry for every job the worker settled since the last vacuum and never marks them dead: the completions of a
 * 300k-job benchmark cell grew from 8 to 24 ms and processing fell from 30k to 12k jobs/s within the cell. With
 * only locked_by written this way, the planner read the whole partial index (every worker's rows in processing)
 * on the same stale estimate. test/settle-plans.spec.ts checks each of these statements.
 */
const HELD_BY_WORKER = `j.status IS NOT DISTINCT FROM 'processing' AND j.locked_by IS NOT DISTINCT FROM $1`;

/**
 * The completion of a batch, in two variants: plain, and with the handlers' results and last progress
 * ($5: {"id": {"r": result, "p": progress}}, only the ids that have either). A batch of jobs that returned
 * nothing keeps the plain statement, so results cost nothing where they are not used.
 *
 * Every settle charges the attempt of a job started from a worker's buffer whose row still says `buffered` (a
 * fast job finishes before any heartbeat tick has told the row it started): `attempts + buffered::int`.
 */
function completion(extraSet: string): string {
  return `
    WITH done AS (
      UPDATE background_jobs AS j
      SET status = 'completed', attempts = j.attempts + j.buffered::int, buffered = false, lease_expires_at = NULL,
          finished_at = now(), updated_at = now()${extraSet}
      WHERE j.id = ANY($2::int8[]) AND ${HELD_BY_WORKER} AND ${BATCH_FENCE}
      RETURNING j.id, j.awaited, ${FLOW_COLUMNS}
    )
    ${REFUSED('done')}
    UNION ALL
    SELECT id, true FROM done WHERE flow_id IS NOT NULL AND ${notifyAwaited('done', `'completed'`)} AND ${stepFlows('done', `'processing'`, `'completed'`)}`;
}

/**
 * The attempt-history rows of the attempts a statement ended without completing (README: "Attempt history"), as a
 * data-modifying CTE (run whether or not the statement reads it). `cte` returns id, attempts, locked_by, locked_at and
 * last_error; `where` filters its rows.
 */
const recordAttempts = (cte: string, outcome: string, where = 'true') => `history AS (
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

/** The failure of a batch: `dead` says when the row ends failed; see failJobs. */
function failure(dead: string, extraSet: string): string {
  return `
    WITH failed AS (
      UPDATE background_jobs AS j
      SET status = CASE WHEN ${dead} THEN 'failed' ELSE 'queued' END::background_job_status,
          run_at = CASE WHEN ${dead} THEN j.run_at ELSE now() + ($3::jsonb -> j.id::text ->> 'delayMs')::int8 ${MS} END,
          finished_at = CASE WHEN ${dead} THEN now() END,
          last_error = $3::jsonb -> j.id::text ->> 'error', attempts = j.attempts + j.buffered::int, buffered = false,
          lease_expires_at = NULL, updated_at = now()${extraSet}
      WHERE j.id = ANY($2::int8[]) AND ${HELD_BY_WORKER}
        AND j.fence_token = ($3::jsonb -> j.id::text ->> 'token')::int8
      RETURNING j.id, j.status, j.awaited, ${FLOW_COLUMNS}, j.attempts, j.locked_by, j.locked_at, j.last_error
    ), ${recordAttempts('failed', `'failed'`)}
    SELECT id, status, flow_id IS NOT NULL AS flow FROM failed
    WHERE ${notifyAwaited('failed', `'failed'`, `w.status = 'failed'`)} AND ${stepFlows('failed', `'processing'`, `'failed'`, `w.status = 'failed'`)}`;
}

/**
 * The heartbeat: one statement for every job this worker holds.
 * - Started jobs ($3, tokens in $4): their leases are renewed, and a job started from the buffer is marked started
 *   (buffered = false) and charged its attempt, if no earlier beat or outcome did. Progress ($5: {"id": progress},
 *   only the ids whose progress changed) rides along in the second variant.
 * - Buffered jobs ($6, tokens in $7), sent when the worker reviews its buffer: read, not renewed (their short
 *   lease bounds how long they are held); those of a paused queue are put back `queued` here, uncharged, with
 *   their run_at kept.
 * Returns the ids still this worker's (renewed, or buffered and kept); any other id is no longer its.
 */
function heartbeat(extraSet: string): string {
  return `
    WITH renewed AS (
      UPDATE background_jobs AS j
      SET lease_expires_at = now() + $2::int ${MS}, attempts = j.attempts + j.buffered::int, buffered = false${extraSet}
      WHERE j.id = ANY($3::int8[]) AND ${HELD_BY_WORKER}${extraSet ? '' : ' AND $5::jsonb IS NULL'}
        AND j.fence_token = ($4::jsonb ->> j.id::text)::int8
      RETURNING j.id
    ), paused AS (
      SELECT queue_name FROM background_queues WHERE paused
    ), given_back AS (
      UPDATE background_jobs AS j
      SET status = 'queued', buffered = false, lease_expires_at = NULL, updated_at = now()
      WHERE j.id = ANY($6::int8[]) AND ${HELD_BY_WORKER} AND j.buffered
        AND j.fence_token = ($7::jsonb ->> j.id::text)::int8 AND j.queue_name IN (SELECT queue_name FROM paused)
      RETURNING j.id
    )
    SELECT id FROM renewed
    UNION ALL
    SELECT j.id FROM background_jobs AS j
    WHERE j.id = ANY($6::int8[]) AND ${HELD_BY_WORKER} AND j.buffered
      AND j.fence_token = ($7::jsonb ->> j.id::text)::int8 AND j.queue_name NOT IN (SELECT queue_name FROM paused)`;
}

const MS = `* interval '1 millisecond'`;

/** How long a migration waits for a table lock before it gives up and tries again (see SQL.migrationTimeouts). */
export const MIGRATION_LOCK_TIMEOUT_MS = 1_000;

/** 5,000 years: any longer retention keeps rows forever, and now() minus it is still a valid timestamp. */
export const RETENTION_CAP_MS = 157_788_000_000_000;

/**
 * A job of a flow that retry() (and the bulk retry) leaves as it is: one of its parents has not completed (its edge is
 * open: the job failed or was cancelled because that parent failed or was cancelled, or because its flow failed
 * first), or is gone (pruned or deleted: the job could not read its result). Retrying the parent brings such a job
 * back, blocked, when its flow failed because of that parent (pg_queue_flow_step). On alias `c`.
 */
export const RETRY_WAITS_FOR_PARENT = `(c.flow_id IS NOT NULL AND EXISTS (
          SELECT 1 FROM background_job_deps AS d LEFT JOIN background_jobs_all AS p ON p.id = d.parent_id
          WHERE d.child_id = c.id AND (NOT d.done OR p.id IS NULL)))`;

/**
 * A finished row the pruner may delete: not of a flow, or of a flow that finished longer ago than the longest
 * retention among its jobs: $2 (this pass's retention) for a flow of completed jobs only, $4 (the longest of the
 * completed and the failed retention, the cap when failed jobs are kept for ever) for a flow with a failed or
 * cancelled job. So a flow's jobs go together, and retry() of a failed flow still finds its completed parents for as
 * long as the failed job is kept. Evaluated per row only for flow jobs (OR stops at the first true).
 */
export const FLOW_PRUNE_RETENTION = `CASE WHEN EXISTS (SELECT 1 FROM background_jobs_all AS x WHERE x.flow_id = f.id AND x.flow_id IS NOT NULL AND x.status IN ('failed', 'cancelled'))
                THEN greatest($2::int8, $4::int8) ELSE $2::int8 END`;
const PRUNABLE_FLOW_JOB = `(flow_id IS NULL OR EXISTS (
              SELECT 1 FROM background_flows AS f WHERE f.id = flow_id AND f.finished_at < now() - least(${FLOW_PRUNE_RETENTION}, ${RETENTION_CAP_MS}) ${MS}))`;

// Jobs with a unique key (and any plain jobs enqueued in the same enqueueMany call), one statement for any
// number of rows; plain enqueues keep insertJob/insertJobs, so a job without a key pays nothing for this.
// The caller folds rows of one key into one first (an ON CONFLICT cannot touch a row twice in a statement).
// Per row ($7 key, $8 onConflict, $9 uniqueForMs, $10 concurrency key):
// - a live key (no window) is held by a queued or running job, through the partial unique index. The
//   insert is ON CONFLICT DO NOTHING, which takes no lock on the holder: a DO UPDATE (even a no-op, even
//   with a false WHERE) would lock it until the caller's transaction ends, and a long transaction would then
//   stall the worker's outcome batch that completes a running holder. 'replace' and 'keep-run-at' then
//   update a holder that has not started: queued, or read ahead into a worker's buffer (which is put back
//   queued with the new payload; its holder is told to drop its copy, REVIEW_CHANNEL). A running holder is never
//   touched, the call is a duplicate of it; an UPDATE re-checks the row's latest version, so a holder claimed
//   or started meanwhile is left alone.
// - a window key (uniqueForMs) is held by its background_job_keys row until held_until, whatever became of
//   the job (the pruner may have deleted it). The upsert always writes, so that it always returns the row
//   and its job_id; it takes the window (with this row's pre-drawn id) only when the last one has ended.
// A duplicate's holder is read in the same statement, but a holder committed after this statement's snapshot
// (the insert waited for it, then found the conflict) is invisible to that read: its row comes back with a
// NULL outcome and the caller runs the statement again for it, with a fresh snapshot. (In the narrower race
// where the holder this snapshot sees finished and another job took the key since, the id returned is the
// first one's: the job that held the key when the call began.) Every row draws an id, duplicates included:
// the sequence has gaps where calls were duplicates.
// Lock order: a call (no manager) is one statement, and two calls naming the same keys in any orders must wait
// for each other, never deadlock. The statement writes in three phases, each in (queue, key) order and each
// finished before the next begins: (1) the windows' key rows, (2) the inserts, (3) the holders that 'replace'
// and 'keep-run-at' lock, then update. A call waits only on calls in the same phase at a smaller key, or on calls
// in a later phase (an insert waits on a holder's update; a lock on a holder someone updated), and a call in a
// later phase never waits on one in an earlier phase (phase 1 holds key rows only phase 1 asks for; an insert in
// progress is invisible to phase 3's lock, and a lock taken in phase 3 does not stop an insert's conflict check).
// So no cycle. Phase 2 used to come last, with phase 3's locks and updates interleaved in plan order: two calls whose
// snapshots differed by a third call's commit then deadlocked, 1 call in 400 (unique-jobs.spec's order test).
// traced: the variant that also writes the enqueue's trace context ($11, one for the whole call) into every row it
// inserts or replaces (see TRACED below).
function insertKeyedJobs(traced: boolean, wake: Wake): string {
  return `
    WITH input AS (
      SELECT * FROM ROWS FROM (unnest($1::text[]), jsonb_array_elements($2::jsonb), unnest($3::int[]), unnest($4::int[]),
                               unnest($5::timestamptz[]), unnest($6::int8[]), unnest($7::text[]), unnest($8::text[]), unnest($9::int8[]),
                               unnest($10::text[]))
        WITH ORDINALITY AS t(q, p, pr, ma, ra, d, k, mode, w, ck, ord)${wake === 'deferred' ? `
      WHERE ${DEFER_WAKE}` : ''}
    ), seq AS (
      SELECT pg_get_serial_sequence('background_jobs', 'id')::regclass AS s
    ), ids AS MATERIALIZED (
      SELECT i.ord, nextval((SELECT s FROM seq)) AS id FROM input AS i ORDER BY i.ord
    ), windows AS (
      -- Phase 1 of 3, the key rows of windows, in (queue, key) order (see Lock order above).
      INSERT INTO background_job_keys AS h (queue_name, unique_key, held_until, job_id)
      SELECT i.q, i.k, now() + i.w ${MS}, n.id FROM input AS i JOIN ids AS n ON n.ord = i.ord WHERE i.w IS NOT NULL
      ORDER BY i.q, i.k
      ON CONFLICT (queue_name, unique_key) DO UPDATE
      SET held_until = CASE WHEN h.held_until <= now() THEN EXCLUDED.held_until ELSE h.held_until END,
          job_id = CASE WHEN h.held_until <= now() THEN EXCLUDED.job_id ELSE h.job_id END
      RETURNING h.queue_name, h.unique_key, h.job_id
    ), inserted AS (
      -- Phase 2, the inserts, in (queue, key) order. A key with a live holder conflicts and is left to phase 3.
      -- The aggregate reads windows whole before the first insert (an EXISTS would read it row by row, interleaved).
      INSERT INTO background_jobs (id, queue_name, payload, priority, max_attempts, run_at, unique_key, concurrency_key${traced ? ', trace_context' : ''})
      SELECT n.id, i.q, i.p, i.pr, i.ma, coalesce(i.ra, now() + i.d ${MS}), CASE WHEN i.w IS NULL THEN i.k END, i.ck${traced ? ', $11::jsonb' : ''}
      FROM input AS i JOIN ids AS n ON n.ord = i.ord
      WHERE i.w IS NULL OR n.id = ANY (coalesce((SELECT array_agg(x.job_id) FROM windows AS x), '{}')::int8[])
      ORDER BY i.q, i.k
      ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL AND status IN ('queued', 'processing') DO NOTHING
      RETURNING id
    ), holders AS (
      -- Phase 3, the holders that 'replace' and 'keep-run-at' update, locked in (queue, key) order once every
      -- insert is done (the aggregate again), then updated (replaced) once every lock is held.
      SELECT j.id, j.status = 'processing' AS held FROM input AS i JOIN ids AS n ON n.ord = i.ord JOIN background_jobs AS j ON j.queue_name = i.q AND j.unique_key = i.k
      WHERE i.k IS NOT NULL AND i.w IS NULL AND i.mode <> 'keep' AND (j.status = 'queued' OR (j.status = 'processing' AND j.buffered))
        AND n.id <> ALL (coalesce((SELECT array_agg(ins.id) FROM inserted AS ins), '{}')::int8[])
      ORDER BY j.queue_name, j.unique_key
      FOR UPDATE OF j
    ), replaced AS (
      UPDATE background_jobs AS j
      SET payload = i.p, run_at = CASE WHEN i.mode = 'replace' THEN coalesce(i.ra, now() + i.d ${MS}) ELSE j.run_at END, updated_at = now(),
          status = 'queued', buffered = false, lease_expires_at = NULL${traced ? ', trace_context = $11::jsonb' : ''}
      FROM input AS i
      WHERE i.k IS NOT NULL AND i.w IS NULL AND i.mode <> 'keep'
        AND j.queue_name = i.q AND j.unique_key = i.k AND (j.status = 'queued' OR (j.status = 'processing' AND j.buffered))
        AND j.id = ANY ((SELECT array_agg(h.id) FROM holders AS h)::int8[])
      -- held: the row sat in a worker's buffer (as locked by holders): its holder must drop its copy.
      RETURNING j.id, j.queue_name, i.ord, (SELECT h.held FROM holders AS h WHERE h.id = j.id) AS held
    )
    SELECT i.ord, coalesce(ins.id, r.id, x.job_id, live.id) AS id,
      CASE WHEN ins.id IS NOT NULL THEN 'inserted' WHEN r.id IS NOT NULL THEN 'replaced'
           WHEN coalesce(x.job_id, live.id) IS NOT NULL THEN 'duplicate' END AS outcome,
      -- replaced rows may now run sooner than the workers' timers know: wake them (inserts notify by trigger),
      -- unless the wake-up is deferred: the caller wakes the queues of its inserted and replaced rows after commit.
      ${wake === 'deferred' ? '0' : `(SELECT count(pg_notify('${JOBS_CHANNEL}', q.queue_name)) FROM (SELECT DISTINCT queue_name FROM replaced) AS q)`} AS notified,
      -- a replaced row that was read ahead: its holder checks its buffer before it starts anything from it.
      (SELECT count(pg_notify('${REVIEW_CHANNEL}', q.queue_name)) FROM (SELECT DISTINCT queue_name FROM replaced WHERE held) AS q) AS reviewed
    FROM input AS i JOIN ids AS n ON n.ord = i.ord
    LEFT JOIN inserted AS ins ON ins.id = n.id
    LEFT JOIN replaced AS r ON r.ord = i.ord
    LEFT JOIN windows AS x ON i.w IS NOT NULL AND x.queue_name = i.q AND x.unique_key = i.k
    LEFT JOIN LATERAL (
      SELECT h.id FROM background_jobs AS h
      WHERE i.k IS NOT NULL AND i.w IS NULL AND ins.id IS NULL AND r.id IS NULL
        AND h.queue_name = i.q AND h.unique_key = i.k AND h.status IN ('queued', 'processing')
      LIMIT 1
    ) AS live ON true
    ORDER BY i.ord`;
}

/**
 * The claim of a queue with limits, in two variants that differ only in how they pick candidates (see
 * claimLimitedJobs and claimKeyedJobs in SQL).
 */
function limitedClaim(candidates: string, limited: string, keysBusy: string, keyCursor: string): string {
  return `
    WITH RECURSIVE running AS (
      SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = $1 AND status = 'processing' AND limited
    ), recent AS (
      SELECT coalesce(sum(n), 0)::int AS n, min(started_at) AS oldest FROM background_queue_starts
      WHERE queue_name = $1 AND started_at > statement_timestamp() - $7::int8 ${MS}
    ), allowance AS (
      SELECT greatest(0, least($2::int, coalesce($5::int - r.n, $2::int), coalesce($6::int - w.n, $2::int))) AS n
      FROM running AS r, recent AS w
${candidates}    ), claimed AS (
      UPDATE background_jobs AS j
      SET status = 'processing', attempts = j.attempts + 1, fence_token = j.fence_token + 1, locked_by = $3,
          locked_at = statement_timestamp(), lease_expires_at = now() + $4::int ${MS}, updated_at = now(),
          limited = ${limited}, buffered = false
      WHERE j.id = ANY(ARRAY(SELECT id FROM candidates)) AND j.status = 'queued'
      RETURNING j.id, j.payload, j.attempts, j.fence_token, j.max_attempts, j.priority, date_part('epoch', now() - j.run_at) * 1000 AS wait_ms,
        date_part('epoch', j.run_at) * 1000 AS run_at_ms, ${CREATED_AT_MS}, j.concurrency_key,
        j.trace_context
    ), logged AS (
      INSERT INTO background_queue_starts (queue_name, started_at, n)
      SELECT $1, statement_timestamp(), count(*) FROM claimed HAVING $6::int IS NOT NULL AND count(*) > 0
    ), forgotten AS (
      DELETE FROM background_queue_starts WHERE queue_name = $1 AND started_at <= statement_timestamp() - $7::int8 ${MS}
    ), outcome AS (
      SELECT (SELECT count(*)::int FROM claimed) AS claimed, a.n AS allowed, r.n AS running, w.n AS started, w.oldest
      FROM allowance AS a, running AS r, recent AS w
    )
    SELECT id, payload, attempts, fence_token, max_attempts, priority, wait_ms, run_at_ms, created_at_ms, trace_context, ${keyCursor} AS key_cursor,
      NULL::float8 AS next_due_ms, NULL::float8 AS rate_wait_ms, NULL::boolean AS at_capacity FROM claimed
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, ${keyCursor},
      CASE WHEN o.claimed < o.allowed THEN
        (SELECT greatest(0, extract(epoch FROM run_at - clock_timestamp()) * 1000)::float8
         FROM background_jobs WHERE queue_name = $1 AND status = 'queued' AND run_at > created_at AND run_at > now()
         ORDER BY run_at LIMIT 1)
      END,
      CASE WHEN o.claimed = o.allowed AND o.started + o.claimed >= $6::int THEN
        greatest(1, extract(epoch FROM coalesce(o.oldest, statement_timestamp()) + $7::int8 ${MS} - clock_timestamp()) * 1000)::float8
      END,
      -- only while jobs wait: a full queue with nothing queued sleeps until NOTIFY like any other
      ((o.claimed = o.allowed AND o.running + o.claimed >= $5::int)${keysBusy})
        -- in the claim index's order: a bare EXISTS was planned as a sequential scan (many queued rows expected)
        AND (SELECT priority FROM background_jobs WHERE queue_name = $1 AND status = 'queued' ORDER BY priority DESC LIMIT 1) IS NOT NULL
    FROM outcome AS o
    WHERE o.claimed < $2`;
}

/**
 * The key a keyed claim's next turn starts after: the last key it claimed from, in turn order (the greatest
 * after the cursor, else the greatest up to it), compared by PostgreSQL, in the index's collation.
 */
const KEY_CURSOR = `coalesce((SELECT coalesce(max(concurrency_key) FILTER (WHERE concurrency_key > $9), max(concurrency_key)) FROM claimed), $9)`;

/**
 * The due jobs a claim takes, as two CTEs (priorities, candidates): the claim index walked one priority at a
 * time (see claimJobs), at most `limit` rows, skipping rows other claimers hold. A paused queue claims nothing;
 * the check is uncorrelated, so Postgres runs it once per statement.
 */
/**
 * The distinct priorities of the queue's ($1) queued jobs, highest first, as a recursive CTE body: one probe of the
 * claim index per priority (a skip scan PostgreSQL 15 does not do by itself), then a NULL row that ends the walk.
 * `atLeast`: only priorities at or above this expression.
 */
function queuedPriorities(atLeast?: string): string {
  const floor = (column: string) => (atLeast === undefined ? '' : ` AND ${column} >= ${atLeast}`);
  return `(SELECT priority FROM background_jobs WHERE queue_name = $1 AND status = 'queued'${floor('priority')} ORDER BY priority DESC LIMIT 1)
      UNION ALL
      SELECT (SELECT b.priority FROM background_jobs AS b
              WHERE b.queue_name = $1 AND b.status = 'queued' AND b.priority < p.priority${floor('b.priority')} ORDER BY b.priority DESC LIMIT 1)
      FROM priorities AS p WHERE p.priority IS NOT NULL`;
}

function dueCandidates(limit: string, lastAttempt = false): string {
  return `priorities AS (
      ${queuedPriorities()}
    ), candidates AS (
      SELECT c.id${lastAttempt ? ', c.last_attempt' : ''} FROM priorities AS p CROSS JOIN LATERAL (
        SELECT id${lastAttempt ? ', j.attempts + 1 >= j.max_attempts AS last_attempt' : ''} FROM background_jobs AS j
        WHERE j.queue_name = $1 AND j.status = 'queued' AND j.priority = p.priority AND j.run_at <= now()
        ORDER BY j.run_at, j.id
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      ) AS c
      WHERE NOT EXISTS (SELECT 1 FROM background_queues WHERE queue_name = $1 AND paused)
      LIMIT ${limit}
`;
}

/**
 * The plain inserts, each in two variants: `traced` also writes trace_context (one value for the whole call, the
 * last parameter), the enqueue's W3C trace context while an OpenTelemetry span is active. An enqueue without
 * one keeps the statement it had before tracing existed: no extra parameter, no column written.
 */
const TRACED = { column: ', trace_context', value: (n: number) => `, $${n}::jsonb` };

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
 * The row is what a claim into the read-ahead buffer would have made of it (processing, `buffered`, uncharged, fence
 * token 1, the buffer's short lease $6): the job starts through the start mark (markStarted), as a buffered job does,
 * so an insert that commits but whose answer never reaches this process leaves a row the sweeper soon puts back
 * uncharged, never one charged and `processing` that nobody runs (issue 39 item 7). The statement claims it only
 * when the claim itself would have taken it: the queue is not paused, and no due queued job of its priority or higher waits before it (the claim index walked one priority at a time,
 * as dueCandidates does, one probe each; rows locked by other claims count as waiting). Otherwise the job goes in
 * `queued` as any other and the trigger sends its NOTIFY; a claimed one sets WAKE_SETTING so that the trigger
 * wakes nobody for a job already taken. Parameters: queue, payload, priority, max_attempts, worker id, lease ms
 * (and the trace context).
 */
function insertEagerJob(traced: boolean): string {
  return `
    WITH RECURSIVE priorities AS (
      ${queuedPriorities('$3')}
    ), eager AS (
      SELECT NOT EXISTS (SELECT 1 FROM background_queues WHERE queue_name = $1 AND paused)
        AND NOT EXISTS (
          SELECT 1 FROM priorities AS p
          WHERE (SELECT j.run_at FROM background_jobs AS j
                 WHERE j.queue_name = $1 AND j.status = 'queued' AND j.priority = p.priority ORDER BY j.run_at, j.id LIMIT 1) <= now()
        ) AS claimed
    )
    INSERT INTO background_jobs AS j (queue_name, payload, priority, max_attempts, status, attempts, buffered, fence_token, locked_by, locked_at, lease_expires_at${traced ? TRACED.column : ''})
    SELECT $1::text, $2::jsonb, $3::int, $4::int,
      CASE WHEN e.claimed THEN 'processing' ELSE 'queued' END::background_job_status, 0, e.claimed, e.claimed::int,
      CASE WHEN e.claimed THEN $5::text END, CASE WHEN e.claimed THEN now() END, CASE WHEN e.claimed THEN now() + $6::int ${MS} END${traced ? TRACED.value(7) : ''}
    FROM eager AS e
    -- An InitPlan, run once before the first row and so before the AFTER STATEMENT trigger reads it (see DEFER_WAKE).
    WHERE (SELECT set_config('${WAKE_SETTING}', CASE WHEN claimed THEN 'deferred' ELSE '' END, true) FROM eager) IS NOT NULL
    -- The claim's columns (ClaimRow): created_at equals run_at, and the job waited 0 ms from due to claimed.
    RETURNING j.id, j.status = 'processing' AS claimed, CASE WHEN j.status = 'processing' THEN j.payload END AS payload, j.attempts + 1 AS attempts, j.fence_token,
      j.max_attempts, j.priority, j.buffered, date_part('epoch', j.run_at) * 1000 AS run_at_ms, NULL::float8 AS created_at_ms,
      0::float8 AS wait_ms, j.trace_context`;
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
 * The claim of a queue without limits; `observed`: see claimJobsObserved.
 *
 * The candidates walk the claim index one priority at a time (highest first: one probe per distinct
 * priority of the queue's queued jobs, then a range scan bounded by run_at <= now() within it): a single
 * scan over (priority DESC, run_at) cannot stop at run_at <= now() across priorities before PostgreSQL 18's
 * skip scan, and read every future job of the queue (1M scheduled for tomorrow on PG 15: 37-155 ms per
 * claim with nothing due). The cost grows with the number of distinct priorities in use, not with jobs.
 * The nested loop keeps the walk's order and stops at $2 rows, so only the rows claimed are locked.
 *
 * The first $5 candidates (the worker's free slots) start at once: charged an attempt, leased for $4 ms. So do up to
 * $7 more, which the worker holds marked started ahead of a free slot (`armed`: StartAhead), stopping before the first
 * job on its last attempt (a death of the worker would dead-letter it unrun; it and the jobs behind it are buffered).
 * The rest are read ahead into the worker's buffer: `buffered`, uncharged, leased for $6 ms only (a short lease
 * nobody renews, so that they are back in the queue soon after their holder dies). Two UPDATEs on disjoint rows,
 * each a primary-key probe per id: no per-row test of which kind a row is.
 */
function plainClaim(observed: boolean): string {
  const extras = observed ? ['wait_ms', 'trace_context'] : [];
  const update = (ids: string, buffered: boolean) => `
      UPDATE background_jobs AS j
      SET status = 'processing', ${buffered ? '' : 'attempts = j.attempts + 1, '}fence_token = j.fence_token + 1, locked_by = $3, locked_at = now(),
          lease_expires_at = now() + ${buffered ? '$6' : '$4'}::int ${MS}, buffered = ${buffered}, updated_at = now()
      -- = ANY(ARRAY(...)) makes this a primary-key probe per claimed id; a join lets the planner pick a
      -- hash join over a sequential scan of the whole table when its statistics are stale.
      WHERE j.id = ANY(ARRAY(${ids}))
      -- Times as epoch milliseconds: parsing two timestamp strings per job was 5% of the worker's CPU. date_part,
      -- not extract: extract returns numeric since PostgreSQL 14 (0.2 µs more per value, three values per job).
      -- attempts: the attempt this claim runs, charged or not.
      RETURNING j.id, j.payload, j.attempts${buffered ? ' + 1' : ''} AS attempts, j.fence_token, j.max_attempts, j.priority, ${buffered} AS buffered,
        date_part('epoch', j.run_at) * 1000 AS run_at_ms, ${CREATED_AT_MS}${
          observed ? `,
        date_part('epoch', now() - j.run_at) * 1000 AS wait_ms, j.trace_context` : ''
        }`;
  return `
    WITH RECURSIVE ${dueCandidates('$2', true)}    ), numbered AS (
      -- The walk's order (a CTE's rows come out in the order they were made), and the first armable row's end.
      SELECT id, row_number() OVER () AS rn, last_attempt FROM candidates
    ), split AS (
      SELECT $5::int + least($7::int, coalesce(min(rn) FILTER (WHERE rn > $5::int AND last_attempt), 2147483647) - $5::int - 1) AS n FROM numbered
    ), started AS (${update('SELECT id FROM numbered WHERE rn <= (SELECT n FROM split)', false)}
    ), held AS (${update('SELECT id FROM numbered WHERE rn > (SELECT n FROM split)', true)}
    ), claimed AS (
      SELECT * FROM started UNION ALL SELECT * FROM held
    )
    -- In claim order (issue 39 item 4): the worker starts its buffered jobs in the order they come back, and the
    -- UPDATEs return rows in the order they visit them (primary key), not the candidates' priority order.
    (SELECT id, payload, attempts, fence_token, max_attempts, priority, buffered, run_at_ms, created_at_ms${extras.map((c) => `, ${c}`).join('')}, NULL::float8 AS next_due_ms FROM claimed
     ORDER BY priority DESC, run_at_ms, id)
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL${extras.map(() => ', NULL').join('')},
      (SELECT greatest(0, extract(epoch FROM run_at - clock_timestamp()) * 1000)::float8
       FROM background_jobs WHERE queue_name = $1 AND status = 'queued' AND run_at > created_at AND run_at > now()
       ORDER BY run_at LIMIT 1)
    WHERE (SELECT count(*) FROM claimed) < $2`;
}

export const SQL = {
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
  // Eager start: see insertEagerJob.
  insertEagerJob: insertEagerJob(false),
  insertEagerJobTraced: insertEagerJob(true),
  // The deferred wake-up itself (WakeSender), one statement for every queue enqueued since the last one. A
  // transaction that wrote nothing else commits without waiting for a WAL flush (PostgreSQL flushes at commit
  // only when the transaction wrote WAL before its commit record), so it holds the NOTIFY commit lock for
  // microseconds (measured: docs/performance.md, Concurrent enqueue).
  wakeQueues: `SELECT count(pg_notify('${JOBS_CHANNEL}', q)) AS notified FROM unnest($1::text[]) AS q`,

  // Claim up to $2 due jobs in one short autocommit statement. SKIP LOCKED lets concurrent workers take
  // disjoint rows without waiting on each other. When the claim comes back short, the extra row (id NULL)
  // carries the delay until the queue's next delayed job, so the worker arms one timer without another
  // round trip; it reads the delayed-jobs index (its predicate is repeated here), one probe.
  // How the candidates are found: plainClaim.
  claimJobs: plainClaim(false),
  // The same claim returning what observers need: wait_ms (the claim latency, due to claimed, by the database
  // clock) while JobEvents has listeners (metrics), trace_context while an OpenTelemetry SDK traces. Two more
  // values per row cost 5-10% of no-op throughput at concurrency 50 when nobody used them, so the plain claim
  // goes without.
  claimJobsObserved: plainClaim(true),

  // The claim of a queue with limits (globalConcurrency, rateLimit), run by JobStore.claimLimitedJobs inside a
  // transaction that first took the queue's advisory lock (beginWithQueueLock), so that claimers of the queue take turns
  // and each one's snapshot, taken after the lock, sees every claim before it. A slot is a row of the queue in
  // `processing` claimed by this statement (limited, counted through background_jobs_limited_idx): completion,
  // failure, sweep and cancel free it by changing the row's status, so a fenced-out (stale) settle frees
  // nothing, and no counter can drift. Settles do not take the lock: they can only lower the count, so a
  // claimer never sees fewer running jobs than there are. The rate limit is a sliding window of the claims
  // that started jobs (background_queue_starts) over the last intervalMs, by statement_timestamp(): taken after
  // the lock, so successive holders' times only grow. Parameters: $1 queue, $2 jobs wanted, $3 worker, $4
  // lease ms, $5 globalConcurrency (NULL: none), $6 rateLimit.max (NULL: none), $7 rateLimit.intervalMs.
  // The extra row (id NULL) of a short claim tells why it is short: next_due_ms as for claimJobs when due
  // jobs ran out; rate_wait_ms (ms until the window frees a start) when the window is full; at_capacity when
  // the queue runs globalConcurrency jobs while others are queued.
  claimLimitedJobs: limitedClaim(`
    ), ${dueCandidates('(SELECT n FROM allowance)')}`, 'CASE WHEN $5::int IS NOT NULL THEN true END', '', 'NULL::text'),

  // The claim of a queue with concurrencyPerKey ($8; and $9, this worker's key cursor): claimLimitedJobs' locks,
  // limits and answers, with candidates taken key by key in turn from the cursor (a round robin over the keys
  // that have queued jobs, so one key's backlog cannot starve the others), each key giving its oldest due jobs
  // up to its free slots (its running jobs are counted through background_jobs_limited_idx, under the same
  // lock). The worker moves its cursor to the last key it claimed from. at_capacity is also set when the claim
  // came back short while keyed jobs run: a key's slot frees when one of them ends.
  claimKeyedJobs: limitedClaim(`
    ), after AS (
      -- The keys with queued jobs after the cursor ($9: the last key this worker claimed from, '' at first),
      -- then from the first key up to the cursor: a loose scan of the keyed claim index, one probe per key,
      -- read only as far as the candidates below need (the LIMIT stops it).
      (SELECT concurrency_key AS k FROM background_jobs
       WHERE queue_name = $1 AND status = 'queued' AND concurrency_key IS NOT NULL AND concurrency_key > $9 ORDER BY concurrency_key LIMIT 1)
      UNION ALL
      SELECT (SELECT b.concurrency_key FROM background_jobs AS b
              WHERE b.queue_name = $1 AND b.status = 'queued' AND b.concurrency_key IS NOT NULL AND b.concurrency_key > a.k ORDER BY b.concurrency_key LIMIT 1)
      FROM after AS a WHERE a.k IS NOT NULL
    ), upto AS (
      (SELECT concurrency_key AS k FROM background_jobs
       WHERE queue_name = $1 AND status = 'queued' AND concurrency_key IS NOT NULL AND concurrency_key <= $9 ORDER BY concurrency_key LIMIT 1)
      UNION ALL
      SELECT (SELECT b.concurrency_key FROM background_jobs AS b
              WHERE b.queue_name = $1 AND b.status = 'queued' AND b.concurrency_key IS NOT NULL AND b.concurrency_key > u.k AND b.concurrency_key <= $9
              ORDER BY b.concurrency_key LIMIT 1)
      FROM upto AS u WHERE u.k IS NOT NULL
    ), turn AS (
      SELECT k FROM after WHERE k IS NOT NULL
      UNION ALL
      SELECT k FROM upto WHERE k IS NOT NULL
    ), keyed AS (
      -- Each key in turn gives its oldest due jobs, as many as it has free slots ($8 less its running jobs).
      SELECT c.id FROM turn AS t CROSS JOIN LATERAL (
        SELECT id FROM background_jobs AS j
        WHERE j.queue_name = $1 AND j.status = 'queued' AND j.concurrency_key = t.k AND j.run_at <= now()
        ORDER BY j.run_at, j.id
        LIMIT greatest(0, $8::int - (SELECT count(*) FROM background_jobs AS r
                                     WHERE r.queue_name = $1 AND r.status = 'processing' AND r.limited AND r.concurrency_key = t.k))
        FOR UPDATE SKIP LOCKED
      ) AS c
      LIMIT (SELECT n FROM allowance)
    ), keyless AS (
      -- Jobs without a key (enqueued by an instance that did not know the queue's options) are not limited per
      -- key: taken from the first due entries of the plain claim index (a bounded read: a large keyed backlog
      -- ahead of them delays them until it shrinks). Read without a lock (that would lock the keyed rows read
      -- too), then the keyless ones locked with SKIP LOCKED: a keyless row another transaction holds is passed
      -- over, not waited for while this claim holds the queue's lock (every claimer of the queue would stall).
      SELECT k.id FROM background_jobs AS k
      WHERE k.id IN (SELECT f.id FROM (
        SELECT id, concurrency_key FROM background_jobs AS j
        WHERE j.queue_name = $1 AND j.status = 'queued' AND j.run_at <= now()
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT 200
      ) AS f WHERE f.concurrency_key IS NULL)
      FOR UPDATE OF k SKIP LOCKED
    ), candidates AS (
      SELECT id FROM (SELECT id FROM keyed UNION ALL SELECT id FROM keyless) AS c
      WHERE NOT EXISTS (SELECT 1 FROM background_queues WHERE queue_name = $1 AND paused)
      LIMIT (SELECT n FROM allowance)
`, 'true', ` OR (o.claimed < o.allowed AND EXISTS (\n        SELECT 1 FROM background_jobs AS r WHERE r.queue_name = $1 AND r.status = 'processing' AND r.limited AND r.concurrency_key IS NOT NULL))`, KEY_CURSOR),

  // Outcomes are fenced: only the lease owner ($1) of the same claim (fence_token, which every claim
  // increments and nothing else touches) may settle a job in flight. A worker that lost its lease (frozen,
  // partitioned, swept, or the job was retried and claimed again) settles late, matches no row and changes
  // nothing. The token of each id comes in a JSON object ($3: {"id": token}), looked up per row, not joined:
  // joined to unnest(), the planner estimated one in-flight row and nested-looped over the whole array for
  // each row (300 ids: 90,000 comparisons, 175 ms, which made completions the bottleneck of a 1M-job steady
  // state). A batch whose jobs all carry one token sends that token alone ($4, BATCH_FENCE). Returns only the
  // ids refused (normally none): sending back every completed id cost the worker a row object, a string and a
  // set entry per job, to learn what it already knew.
  completeJobs: completion(''),
  completeJobsWithResults: completion(`,
          result = $5::jsonb -> j.id::text -> 'r', progress = coalesce($5::jsonb -> j.id::text -> 'p', j.progress)`),

  // completedRetentionMs: 0. Deleting at completion skips writing a completed row version (and its index
  // entries) that the pruner would delete later anyway; same fence and result as completeJobs. No result
  // is kept: a waiter hears "completed" and resolves with null.
  // A job of a flow is kept, completed, whatever the retention: its dependents read its result, and the flow's jobs
  // are pruned together once the flow has finished.
  deleteCompletedJobs: `
    WITH gone AS (
      DELETE FROM background_jobs AS j
      WHERE j.id = ANY($2::int8[]) AND ${HELD_BY_WORKER}
        AND ${BATCH_FENCE} AND j.flow_id IS NULL
      RETURNING j.id, j.awaited, j.flow_id, j.flow_ref, j.compensates, j.last_error IS NOT NULL AS had_failed
    ), ${forgetAttempts('gone')}, kept AS (
      -- Only the ids the delete left (flow jobs, and refused ones): a batch of plain jobs probes no row twice.
      -- Of those, the ones still held and fenced are flow jobs (the delete took every other), so flow_id is not
      -- tested again: \`flow_id IS NOT NULL\` let the planner read the flows' partial index whole (see HELD_BY_WORKER).
      UPDATE background_jobs AS j
      SET status = 'completed', attempts = j.attempts + j.buffered::int, buffered = false, lease_expires_at = NULL, finished_at = now(), updated_at = now()
      WHERE j.id = ANY(ARRAY(SELECT unnest($2::int8[]) EXCEPT SELECT id FROM gone)) AND ${HELD_BY_WORKER}
        AND ${BATCH_FENCE}
      RETURNING j.id, j.awaited, ${FLOW_COLUMNS}
    ), done AS (
      SELECT id, awaited, flow_id, flow_ref, compensates FROM gone UNION ALL SELECT * FROM kept
    )
    ${REFUSED('done')}
    UNION ALL
    SELECT id, true FROM kept WHERE ${notifyAwaited('done', `'completed'`)} AND ${stepFlows('kept', `'processing'`, `'completed'`)}`,

  // Each failed attempt's fence and outcome come in a JSON object ($3: {"id": {token, error, delayMs}}), looked
  // up per row like completeJobs' attempts, for the same reason: no join to nest-loop over. The variant also
  // takes `final` (fail the job for good whatever attempts are left: a result the queue cannot store, which a
  // retry would only produce again) and the attempt's last `progress`; batches without either keep the plain
  // statement (the variant's extra lookups per row cost about a fifth more on a 500-row batch).
  failJobs: failure('j.attempts + j.buffered::int >= j.max_attempts', ''),
  failJobsWithExtras: failure(
    `(j.attempts + j.buffered::int >= j.max_attempts OR ($3::jsonb -> j.id::text) ? 'final')`,
    `, progress = coalesce($3::jsonb -> j.id::text -> 'progress', j.progress)`,
  ),

  // A handler snoozed (JobSnoozedError): back to the queue after the delay, fenced like a failure. The attempt
  // is not counted (uncharged, as the put-back); fence_token keeps its value, so a late outcome of this claim
  // stays fenced out. Delays come in a JSON object ($3: {"id": {token, delayMs}}), as for failJobs.
  snoozeJobs: `
    UPDATE background_jobs AS j
    SET status = 'queued', attempts = j.attempts - (NOT j.buffered)::int, buffered = false,
        run_at = now() + ($3::jsonb -> j.id::text ->> 'delayMs')::int8 ${MS}, lease_expires_at = NULL, updated_at = now()
    WHERE j.id = ANY($2::int8[]) AND ${HELD_BY_WORKER}
      AND j.fence_token = ($3::jsonb -> j.id::text ->> 'token')::int8
    RETURNING j.id`,

  // Heartbeat (see heartbeat above): rows not returned are no longer ours. The fence tokens come as JSON
  // objects, as for completeJobs. A beat that carries progress (job.progress() called since the last one) takes
  // the second variant: progress rides the heartbeat, no statement of its own.
  heartbeat: heartbeat(''),
  heartbeatWithProgress: heartbeat(`, progress = coalesce($5::jsonb -> j.id::text, j.progress)`),

  // Put-back (shutdown, a buffer given back): an attempt that ran did not fail, it was interrupted, so it is not
  // counted, and a buffered job was never charged (fence_token, which fences that attempt's late outcome, keeps
  // its value).
  releaseJobs: `
    WITH released AS (
      UPDATE background_jobs AS j
      SET status = 'queued', attempts = j.attempts - (NOT j.buffered)::int, buffered = false, run_at = now(),
          lease_expires_at = NULL, updated_at = now()
      WHERE j.id = ANY($2::int8[]) AND ${HELD_BY_WORKER}
        AND j.fence_token = ($3::jsonb ->> j.id::text)::int8
      RETURNING j.id, j.queue_name
    )
    SELECT count(*)::int AS released,
      (SELECT count(pg_notify('${JOBS_CHANNEL}', q.queue_name)) FROM (SELECT DISTINCT queue_name FROM released) AS q) AS notified
    FROM released`,

  // The start mark (QueueWorker.pump, issue 39): jobs of a worker's read-ahead buffer (or eager start) about to start,
  // told to their rows before any handler is called: charged their attempt, `buffered = false`, the full lease ($2).
  // Fenced like a settle (this worker, in processing, the claim's fence_token), so a row cancelled, replaced, swept
  // or given back meanwhile (each sets another status) is refused and its job never starts. Returns the ids marked.
  // Whatever reads "not started" (buffered) is then true: a started job's row has said so since before its handler
  // began. Idempotent (charged once: `+ buffered::int`): a mark sent again after one whose answer was lost finds its
  // own work and confirms it. The rows are visited in id order (one primary-key probe each, the array's keys sorted),
  // the order a bulk cancel and a flow's cancel lock them in.
  markStarted: `
    UPDATE background_jobs AS j
    SET attempts = j.attempts + j.buffered::int, buffered = false, lease_expires_at = now() + $2::int ${MS}, updated_at = now()
    WHERE j.id = ANY($3::int8[]) AND ${HELD_BY_WORKER}
      AND j.fence_token = ($4::jsonb ->> j.id::text)::int8
    RETURNING j.id`,

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
      RETURNING id, queue_name, status, awaited, flow_id, flow_ref, compensates, attempts, locked_by, locked_at, last_error
    ), ${recordAttempts('rescued', `'lease-expired'`, 'w.locked_at IS NOT NULL')}
    SELECT (SELECT held FROM lock) AS held,
      count(*) FILTER (WHERE status = 'queued')::int AS requeued,
      count(*) FILTER (WHERE status = 'failed')::int AS failed,
      (SELECT count(pg_notify('${JOBS_CHANNEL}', q.queue_name))
       FROM (SELECT DISTINCT queue_name FROM rescued WHERE status = 'queued') AS q) AS notified,
      (SELECT count(pg_notify('${DONE_CHANNEL}', w.id || ':failed')) FROM rescued AS w WHERE w.awaited AND w.status = 'failed') AS waiters_told,
      ${stepFlows('rescued', `'processing'`, `'failed'`, `w.status = 'failed'`)} AS flows_stepped,
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

  getJob: `SELECT * FROM background_jobs_all WHERE id = $1`,

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
    FROM (SELECT queue_name FROM background_jobs WHERE status = 'blocked' AND flow_id IS NOT NULL ORDER BY status, id LIMIT $1 + 1) AS b GROUP BY 1
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
      RETURNING j.id, j.fence_token, t.was, j.awaited, ${FLOW_COLUMNS}
    )
    SELECT t.was,
      (SELECT count(pg_notify('${CANCEL_CHANNEL}', c.id || ':' || c.fence_token)) FROM cancelled AS c WHERE c.was = 'processing') AS notified,
      (SELECT count(pg_notify('${DONE_CHANNEL}', c.id || ':cancelled')) FROM cancelled AS c WHERE c.awaited) AS waiters_told,
      ${stepFlows('cancelled', 'w.was::text', `'cancelled'`)} AS flows_stepped,
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

  // Which database a connection is on (databases/database-check.ts): its name and its server's start time, which
  // name one server whatever the route to it (TCP or a Unix socket, PgBouncer or not) and need no privilege; the
  // address and port only for messages.
  databaseIdentity: `SELECT current_database() AS database, pg_postmaster_start_time()::text AS started,
    coalesce(host(inet_server_addr()), 'a Unix socket') AS host, inet_server_port() AS port`,

  // Jobs with a unique key, any number of rows, planned per call (see insertKeyedJobs above).
  insertKeyedJobs: insertKeyedJobs(false, 'trigger'),
  // The same statement for one row (enqueue, enqueueUnique): prepared, since a one-row call's plan does not
  // depend on array lengths, and planning this statement on every call cost more than running it.
  insertKeyedJob: insertKeyedJobs(false, 'trigger'),
  insertKeyedJobsTraced: insertKeyedJobs(true, 'trigger'),
  insertKeyedJobTraced: insertKeyedJobs(true, 'trigger'),
  insertKeyedJobsWakeDeferred: insertKeyedJobs(false, 'deferred'),
  insertKeyedJobWakeDeferred: insertKeyedJobs(false, 'deferred'),
  insertKeyedJobsTracedWakeDeferred: insertKeyedJobs(true, 'deferred'),
  insertKeyedJobTracedWakeDeferred: insertKeyedJobs(true, 'deferred'),

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

  // Migrations take the lock by polling, never by a blocking wait: a backend waiting on a lock holds a
  // snapshot, and a CREATE INDEX CONCURRENTLY run by the holder waits for every older snapshot (deadlock).
  // Transaction-scoped, so it also works through a transaction pooler; released at COMMIT or ROLLBACK.
  migrationTryLock: `SELECT pg_try_advisory_xact_lock(${ADVISORY_LOCK.migrate}) AS held`,
  // Session-scoped, on a direct connection, for the migrations that run outside a transaction.
  migrationSessionTryLock: `SELECT pg_try_advisory_lock(${ADVISORY_LOCK.migrate}) AS held`,
  migrationSessionUnlock: `SELECT pg_advisory_unlock(${ADVISORY_LOCK.migrate})`,
  // Migrations must not inherit the app's statement_timeout: an index build on a big table takes minutes. But a
  // table lock is waited for at most MIGRATION_LOCK_TIMEOUT_MS: PostgreSQL queues every later statement on the
  // table behind a waiting ALTER, so a long wait would stop enqueues and claims; the runner backs off and tries
  // again. (Index builds CONCURRENTLY wait for old transactions without blocking anyone: lock_timeout off there.)
  migrationTimeouts: `SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = ${MIGRATION_LOCK_TIMEOUT_MS}`,
  migrationSessionTimeouts: `SET statement_timeout = 0; SET lock_timeout = ${MIGRATION_LOCK_TIMEOUT_MS}`,
  migrationSessionTimeoutsReset: `RESET statement_timeout; RESET lock_timeout`,
  // `pg-queue migrate down`: an operator's command, which waits as long as it takes.
  migrationSessionTimeoutsOff: `SET statement_timeout = 0; SET lock_timeout = 0`,
  // Who holds a lock on the queue's tables (for the log line of a migration that gave up waiting): the oldest first.
  migrationBlockers: `
    SELECT a.pid, a.application_name, a.state, floor(extract(epoch FROM now() - a.xact_start))::int AS xact_s
    FROM pg_stat_activity AS a
    WHERE a.pid <> pg_backend_pid() AND a.pid IN (
      SELECT l.pid FROM pg_locks AS l JOIN pg_class AS c ON c.oid = l.relation
      WHERE l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND left(c.relname, 11) = 'background_')
    ORDER BY a.xact_start NULLS LAST
    LIMIT 5`,
} as const;

/**
 * A limited claim's transaction idle this long (its process frozen or stalled between two of its round trips)
 * is ended by PostgreSQL, which releases the queue's lock: every other claimer of the queue waits on it.
 */
export const LIMIT_LOCK_IDLE_MS = 2_000;

/**
 * Opens the transaction of a limited queue's claim and takes the queue's lock, in one round trip (a simple
 * query of three statements; the key is an integer, so it is inlined safely). The lock serialises the
 * claimers of one limited queue; transaction-scoped, so it also works through a transaction pooler; in the
 * two-int4 key space, which never meets ADVISORY_LOCK's int8 keys.
 */
export function beginWithQueueLock(queueKey: number): string {
  if (!Number.isInteger(queueKey)) throw new TypeError(`queue lock key must be an integer, got ${queueKey}`);
  return `BEGIN; SET LOCAL idle_in_transaction_session_timeout = ${LIMIT_LOCK_IDLE_MS}; SELECT pg_advisory_xact_lock(${LIMIT_LOCK_SPACE}, ${queueKey})`;
}

/**
 * Statements keyed by arrays are sent unnamed, so PostgreSQL plans each call with the real arrays. Prepared,
 * they switch to a generic plan after five runs, which cannot see the array length: when these statements
 * still joined unnest(), that plan rescanned it for every row, and a 1,000-row completion batch took 294 ms
 * instead of 6.8 ms (processing at concurrency 50 fell from 6.5-7.2k to 2.2-5.6k jobs/s). Planning costs well
 * under a millisecond, once per batch.
 */
export const PLANNED_PER_CALL: ReadonlySet<keyof typeof SQL> = new Set([
  'completeJobs',
  'completeJobsWithResults',
  'deleteCompletedJobs',
  'failJobs',
  'failJobsWithExtras',
  'heartbeat',
  'heartbeatWithProgress',
  'releaseJobs',
  'markStarted',
  'insertKeyedJobs',
  'insertKeyedJobsTraced',
  'insertKeyedJobsWakeDeferred',
  'insertKeyedJobsTracedWakeDeferred',
  'snoozeJobs',
]);
