// Settle: what ends or renews a claim (complete, fail, snooze, put back, heartbeat, the start mark), each
// fenced on the worker and the claim's fence token.
import { JOBS_CHANNEL } from '../pg-queue.constants.js';
import { appendLogs, FLOW_COLUMNS, forgetAttempts, keyBlocked, MS, notifyAwaited, recordAttempts, stepFlows, stepSuccessors, SUCCESSOR_COLUMNS } from './shared.sql.js';

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
 * A job (row `j`) whose queue must start nothing now: paused, or blocked by a partner's 429 (blocked_until), or whose
 * own key is blocked (background_queue_key_blocks; the queue's key_blocked_until, the latest end of its keys' blocks,
 * says whether to look, so a queue with no key blocked pays the one probe of its row). Read in the statements that
 * would start a held, unstarted (buffered) job, the start mark and the heartbeat's check of the buffer: a pause or a
 * block holds from its commit in every process, whether its notice (REVIEW_CHANNEL) came, came late or was lost.
 */
const MUST_NOT_START = `EXISTS (SELECT 1 FROM background_queues AS q WHERE q.queue_name = j.queue_name
        AND (q.paused OR q.blocked_until > now()
          OR (j.concurrency_key IS NOT NULL AND q.key_blocked_until > now() AND ${keyBlocked('j.concurrency_key', 'j.queue_name')})))`;

/**
 * The completion of a batch, in two variants: plain, and with the handlers' results and last progress
 * ($5: {"id": {"r": result, "p": progress}}, only the ids that have either). A batch of jobs that returned
 * nothing keeps the plain statement, so results cost nothing where they are not used.
 *
 * Every settle charges the attempt of a row that still says `buffered`: `attempts + buffered::int`. Since the start
 * mark (markStarted) tells the row before a buffered job's handler is called, a settle should find none; the charge
 * keeps the count right whatever path got a row there.
 */
function completion(extraSet: string, successors = true): string {
  return `
    WITH done AS (
      UPDATE background_jobs AS j
      SET status = 'completed', attempts = j.attempts + j.buffered::int, buffered = false, lease_expires_at = NULL,
          finished_at = now(), updated_at = now()${extraSet}
      WHERE j.id = ANY($2::int8[]) AND ${HELD_BY_WORKER} AND ${BATCH_FENCE}
      RETURNING j.id, j.awaited, ${FLOW_COLUMNS}${successors ? `, ${SUCCESSOR_COLUMNS}` : ''}
    )
    ${REFUSED('done')}
    UNION ALL
    SELECT id, true FROM done WHERE flow_id IS NOT NULL AND ${notifyAwaited('done', `'completed'`)} AND ${stepFlows('done', `'processing'`, `'completed'`)}${
      successors ? `
      AND ${stepSuccessors('done')}` : ''}`;
}

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
      RETURNING j.id, j.status, j.awaited, ${FLOW_COLUMNS}, j.attempts, j.locked_by, j.locked_at, j.last_error, ${SUCCESSOR_COLUMNS}
    ), ${recordAttempts('failed', `'failed'`)}
    SELECT id, status, flow_id IS NOT NULL AS flow FROM failed
    WHERE ${notifyAwaited('failed', `'failed'`, `w.status = 'failed'`)} AND ${stepFlows('failed', `'processing'`, `'failed'`, `w.status = 'failed'`)}
      AND ${stepSuccessors('failed', `w.status = 'failed'`)}`;
}

/**
 * The heartbeat: one statement for every job this worker holds.
 * - Started jobs ($3, tokens in $4): their leases are renewed, and a job started from the buffer is marked started
 *   (buffered = false) and charged its attempt, if no earlier beat or outcome did. Progress ($5: {"id": progress},
 *   only the ids whose progress changed) rides along in the second variant.
 * - Buffered jobs ($6, tokens in $7), sent when the worker reviews its buffer: read, not renewed (their short
 *   lease bounds how long they are held); those whose queue or key must start nothing now (MUST_NOT_START: paused,
 *   blocked by a 429) are put back `queued` here, uncharged, with their run_at kept.
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
    ), given_back AS (
      -- A queue paused or blocked by a partner's 429 (RateLimitedError), or a key blocked: its buffered jobs go back.
      UPDATE background_jobs AS j
      SET status = 'queued', buffered = false, lease_expires_at = NULL, updated_at = now()
      WHERE j.id = ANY($6::int8[]) AND ${HELD_BY_WORKER} AND j.buffered
        AND j.fence_token = ($7::jsonb ->> j.id::text)::int8 AND ${MUST_NOT_START}
      RETURNING j.id
    )
    SELECT id FROM renewed
    UNION ALL
    SELECT j.id FROM background_jobs AS j
    WHERE j.id = ANY($6::int8[]) AND ${HELD_BY_WORKER} AND j.buffered
      AND j.fence_token = ($7::jsonb ->> j.id::text)::int8 AND NOT ${MUST_NOT_START}`;
}

/** The completion variant's results and progress ($5: {"id": {"r": result, "p": progress}}). */
const RESULTS = `,
          result = $5::jsonb -> j.id::text -> 'r', progress = coalesce($5::jsonb -> j.id::text -> 'p', j.progress)`;

/** The failure variant's end condition: the last attempt, or `final` (a result the queue cannot store). */
const FINAL_OR_LAST = `(j.attempts + j.buffered::int >= j.max_attempts OR ($3::jsonb -> j.id::text) ? 'final')`;

/** The failure variant's last progress ($3: {"id": {..., "progress"}}). */
const FAILED_PROGRESS = `, progress = coalesce($3::jsonb -> j.id::text -> 'progress', j.progress)`;

/** The heartbeat variant's progress ($5: {"id": progress}). */
const BEAT_PROGRESS = `, progress = coalesce($5::jsonb -> j.id::text, j.progress)`;

/** A handler snoozed (see snoozeJobs below). */
function snooze(extraSet: string): string {
  return `
    UPDATE background_jobs AS j
    SET status = 'queued', attempts = j.attempts - (NOT j.buffered)::int, buffered = false,
        run_at = now() + ($3::jsonb -> j.id::text ->> 'delayMs')::int8 ${MS}, lease_expires_at = NULL, updated_at = now(),
        -- A partner's 429 (RateLimitedError) says so in last_error; a plain snooze leaves it as it was.
        last_error = coalesce($3::jsonb -> j.id::text ->> 'note', j.last_error)${extraSet}
    WHERE j.id = ANY($2::int8[]) AND ${HELD_BY_WORKER}
      AND j.fence_token = ($3::jsonb -> j.id::text ->> 'token')::int8
    RETURNING j.id`;
}

/** The put-back (see releaseJobs below). */
function release(extraSet: string): string {
  return `
    WITH released AS (
      UPDATE background_jobs AS j
      SET status = 'queued', attempts = j.attempts - (NOT j.buffered)::int, buffered = false, run_at = now(),
          lease_expires_at = NULL, updated_at = now()${extraSet}
      WHERE j.id = ANY($2::int8[]) AND ${HELD_BY_WORKER}
        AND j.fence_token = ($3::jsonb ->> j.id::text)::int8
      RETURNING j.id, j.queue_name
    )
    SELECT count(*)::int AS released,
      (SELECT count(pg_notify('${JOBS_CHANNEL}', q.queue_name)) FROM (SELECT DISTINCT queue_name FROM released) AS q) AS notified
    FROM released`;
}

/**
 * completedRetentionMs: 0. Deleting at completion skips writing a completed row version (and its index entries) that
 * the pruner would delete later anyway; same fence as completeJobs. Two kinds of job are kept, completed, and left to
 * the pruner, so their rows get what completion() writes (`keptSet` is completion()'s extraSet, set on the kept rows
 * only): a job of a flow, whatever the retention (its dependents read its result, and the flow's jobs are pruned
 * together once the flow has finished); and a job someone waits on (awaited: waitFor marked it before it finished),
 * whose waiter reads the result from the row. Deleted with the rest, an awaited job answered its waiter null in place
 * of its result, or, when the notice was missed (LISTEN down), "the job's row is gone" (the simulation's seed 52).
 * The mark and this statement lock the row: whichever commits first decides, and a mark that comes after the
 * deletion finds no row (waitFor says the retention may have deleted it).
 */
function deletion(keptSet: string): string {
  return `
    WITH gone AS (
      DELETE FROM background_jobs AS j
      WHERE j.id = ANY($2::int8[]) AND ${HELD_BY_WORKER}
        AND ${BATCH_FENCE} AND j.flow_id IS NULL AND j.awaited IS NOT TRUE
      RETURNING j.id, j.awaited, j.flow_id, j.flow_ref, j.compensates, j.last_error IS NOT NULL AS had_failed, ${SUCCESSOR_COLUMNS}
    ), ${forgetAttempts('gone')}, kept AS (
      -- Only the ids the delete left (flow jobs, awaited jobs, and refused ones): a batch of plain jobs probes no row
      -- twice. Of those, the ones still held and fenced are the ones to keep (the delete took every other), so
      -- neither is tested again: \`flow_id IS NOT NULL\` let the planner read the flows' partial index whole (see HELD_BY_WORKER).
      UPDATE background_jobs AS j
      SET status = 'completed', attempts = j.attempts + j.buffered::int, buffered = false, lease_expires_at = NULL, finished_at = now(), updated_at = now()${keptSet}
      WHERE j.id = ANY(ARRAY(SELECT unnest($2::int8[]) EXCEPT SELECT id FROM gone)) AND ${HELD_BY_WORKER}
        AND ${BATCH_FENCE}
      RETURNING j.id, j.awaited, ${FLOW_COLUMNS}, ${SUCCESSOR_COLUMNS}
    ), done AS (
      SELECT id, awaited, flow_id, flow_ref, compensates, queue_name, unique_key FROM gone UNION ALL SELECT * FROM kept
    )
    ${REFUSED('done')}
    UNION ALL
    SELECT id, true FROM kept WHERE ${notifyAwaited('done', `'completed'`)} AND ${stepFlows('kept', `'processing'`, `'completed'`)} AND ${stepSuccessors('done')}`;
}

export const SETTLE_SQL = {
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
  completeJobsWithResults: completion(RESULTS),
  // A batch whose claims said no job has a unique key (ClaimedJob.keyless: the plain claim's, an eager start's): no
  // successor can wait for any of them (onConflict 'queue-after'), so neither the key columns nor the successor step
  // (an interlocked A/B of the completion of 50 jobs: 5 to 10% of the statement, planning included).
  completeJobsKeyless: completion('', false),
  completeJobsWithResultsKeyless: completion(RESULTS, false),
  // A batch of which some job logged (job.log(): README, "Job logs"): results, progress and each job's unwritten
  // lines ($5: {"id": {"r", "p", "l"}}). A batch in which no job logged keeps one of the two statements above.
  completeJobsWithLogs: completion(`${RESULTS}, logs = ${appendLogs(`$5::jsonb -> j.id::text -> 'l'`)}`),

  // completedRetentionMs: 0 (deletion()): plain, and, for a batch with a result, progress or lines, the variant that
  // writes them on the flow jobs it keeps ($5, as completeJobsWithLogs reads it). A kept flow job that lost its result
  // here made its children read null (job.parents()).
  deleteCompletedJobs: deletion(''),
  deleteCompletedJobsWithResults: deletion(`${RESULTS}, logs = ${appendLogs(`$5::jsonb -> j.id::text -> 'l'`)}`),

  // Each failed attempt's fence and outcome come in a JSON object ($3: {"id": {token, error, delayMs}}), looked
  // up per row like completeJobs' attempts, for the same reason: no join to nest-loop over. The variant also
  // takes `final` (fail the job for good whatever attempts are left: a result the queue cannot store, which a
  // retry would only produce again) and the attempt's last `progress`; batches without either keep the plain
  // statement (the variant's extra lookups per row cost about a fifth more on a 500-row batch).
  failJobs: failure('j.attempts + j.buffered::int >= j.max_attempts', ''),
  failJobsWithExtras: failure(FINAL_OR_LAST, FAILED_PROGRESS),
  // A batch of which some job logged: the extras, and each job's unwritten lines ($3: {"id": {..., "logs"}}).
  failJobsWithLogs: failure(FINAL_OR_LAST, `${FAILED_PROGRESS}, logs = ${appendLogs(`$3::jsonb -> j.id::text -> 'logs'`)}`),

  // A handler snoozed (JobSnoozedError): back to the queue after the delay, fenced like a failure. The attempt
  // is not counted (uncharged, as the put-back); fence_token keeps its value, so a late outcome of this claim
  // stays fenced out. Delays come in a JSON object ($3: {"id": {token, delayMs, note?}}), as for failJobs.
  snoozeJobs: snooze(''),
  // A batch of which some job logged: each job's unwritten lines ($3: {"id": {..., "logs"}}).
  snoozeJobsWithLogs: snooze(`,
        logs = ${appendLogs(`$3::jsonb -> j.id::text -> 'logs'`)}`),

  // Heartbeat (see heartbeat above): rows not returned are no longer ours. The fence tokens come as JSON
  // objects, as for completeJobs. A beat that carries progress (job.progress() called since the last one) takes
  // the second variant: progress rides the heartbeat, no statement of its own.
  heartbeat: heartbeat(''),
  heartbeatWithProgress: heartbeat(BEAT_PROGRESS),
  // A beat that carries lines a handler logged since the last one (job.log(): README, "Job logs"): the progress
  // variant, and each job's unwritten lines ($8: {"id": entry}, only the ids that logged).
  heartbeatWithLogs: heartbeat(`${BEAT_PROGRESS}, logs = ${appendLogs(`$8::jsonb -> j.id::text`)}`),

  // Put-back (shutdown, a buffer given back): an attempt that ran did not fail, it was interrupted, so it is not
  // counted, and a buffered job was never charged (fence_token, which fences that attempt's late outcome, keeps
  // its value).
  releaseJobs: release(''),
  // The put-back of running jobs at shutdown of which some logged: their unwritten lines ($4: {"id": entry}).
  releaseJobsWithLogs: release(`,
          logs = ${appendLogs(`$4::jsonb -> j.id::text`)}`),

  // The start mark (QueueWorker.pump, issue 39): jobs of a worker's read-ahead buffer (or eager start) about to start,
  // told to their rows before any handler is called: charged their attempt, `buffered = false`, the full lease ($2).
  // Fenced like a settle (this worker, in processing, the claim's fence_token), so a row cancelled, replaced, swept
  // or given back meanwhile (each sets another status) is refused and its job never starts. Returns the ids marked.
  // Whatever reads "not started" (buffered) is then true: a started job's row has said so since before its handler
  // began. Idempotent (charged once: `+ buffered::int`): a mark sent again after one whose answer was lost finds its
  // own work and confirms it. The rows are visited in id order (one primary-key probe each, the array's keys sorted),
  // the order a bulk cancel and a flow's cancel lock them in.
  // A buffered job whose queue is paused or blocked by a 429, or whose key is blocked (MUST_NOT_START), is not marked:
  // it goes back `queued`, uncharged, in the same statement, so that such a job starts in no process from the commit
  // of the pause or block on, whether or not its notice reached the holder (the notice only makes the holder give its
  // buffer back sooner). One UPDATE decides each row once (`back`, a row sub-select, so MUST_NOT_START is read once
  // per buffered row): its rows are locked in id order, as a single statement, and a row changed meanwhile is decided
  // again on its latest version. Two UPDATEs, one marking and one giving back, each locked in id order but the second
  // after the first, which could deadlock with a bulk cancel; and a row a first mark (whose answer was lost) started
  // after the second's snapshot fell in neither, a started job then dropped by its worker as lost. A row found started
  // already (a mark sent again) started before: `back` is false for it and it is confirmed.
  markStarted: `
    WITH decided AS (
      UPDATE background_jobs AS j
      SET (status, attempts, buffered, lease_expires_at, updated_at) = (
        SELECT CASE WHEN d.back THEN 'queued'::background_job_status ELSE j.status END, j.attempts + (j.buffered AND NOT d.back)::int, false,
          CASE WHEN d.back THEN NULL ELSE now() + $2::int ${MS} END, now()
        FROM (SELECT j.buffered AND ${MUST_NOT_START} AS back) AS d)
      WHERE j.id = ANY($3::int8[]) AND ${HELD_BY_WORKER}
        AND j.fence_token = ($4::jsonb ->> j.id::text)::int8
      RETURNING j.id, j.status
    )
    SELECT id FROM decided WHERE status = 'processing'`,
} as const;
