// Statements of partitioned history (README: "Long retention: partitioned history"; migration JobHistory1764660000000):
// the mover that takes finished jobs out of background_jobs, the partitions it writes into, and the pruner's drop of
// partitions past retention. Nothing here runs in a worker: the hot path's statements are in claim.sql.ts and settle.sql.ts.
import { ADVISORY_LOCK } from '../pg-queue.constants.js';
import { flowAtRest, RETENTION_CAP_MS } from './shared.sql.js';

const MS = `* interval '1 millisecond'`;

/** The width of one history partition: rows are kept up to retention plus one width. */
export type HistoryPartitionWidth = 'hour' | 'day' | 'week' | 'month';
export const HISTORY_PARTITION_WIDTHS: readonly HistoryPartitionWidth[] = ['hour', 'day', 'week', 'month'];

/** The two kinds of history: completed jobs, and failed or cancelled ones (each kind has its own retention). */
export type HistoryKind = 'completed' | 'failed';
export const HISTORY_PARENT: Record<HistoryKind, string> = {
  completed: 'background_jobs_history_completed',
  failed: 'background_jobs_history_failed',
};

/**
 * A finished job of a flow moves only once its flow has finished and none of its jobs can run (flowAtRest: a job
 * retried after the flow's end): until then its dependents and the flow's statements (flow.sql.ts) read it in
 * background_jobs. And only when its kind's retention (`completed`, `failed`:
 * parameters in ms, failed NULL: kept for ever) is the longest among its flow's jobs: the pruner deletes a flow's jobs
 * together, after that longest retention (maintenance.sql.ts, PRUNABLE_FLOW_JOB), and a history partition is dropped at its
 * own kind's retention: a failed flow's completed jobs stay in background_jobs while its failed ones are kept longer,
 * so that a retry of the flow finds its completed parents.
 */
const MOVABLE_FLOW_JOB = (completed: string, failed: string) => `(j.flow_id IS NULL OR (
           EXISTS (SELECT 1 FROM background_flows AS f WHERE f.id = j.flow_id AND f.finished_at IS NOT NULL)
           AND ${flowAtRest('j.flow_id')}
           AND CASE WHEN j.status = 'completed'
                    THEN NOT ((${failed}::int8 IS NULL OR ${failed}::int8 > ${completed}::int8)
                              AND EXISTS (SELECT 1 FROM background_jobs_all AS x WHERE x.flow_id = j.flow_id AND x.flow_id IS NOT NULL AND x.status IN ('failed', 'cancelled')))
                    ELSE ${failed}::int8 IS NULL OR ${failed}::int8 >= ${completed}::int8 END))`;

/**
 * One status's finished rows past $1 ms, oldest first through the finished-jobs index (status, finished_at), and not
 * yet past `retention` (ms, NULL: kept for ever): those the pruner deletes where they are, rather than the mover
 * moving them into a partition the pruner is about to drop.
 */
const finishedBefore = (status: string, retention: string) => `
      (SELECT j.id, j.status, j.finished_at FROM background_jobs AS j
       WHERE j.status = '${status}' AND j.finished_at < now() - $1::int8 ${MS}
         AND (${retention}::int8 IS NULL OR j.finished_at >= now() - least(${retention}::int8, ${RETENTION_CAP_MS}) ${MS})
         AND ${MOVABLE_FLOW_JOB('$4', '$5')}
       ORDER BY j.finished_at LIMIT $2)`;

/**
 * The ids of \`target\` (id, flow_id) and of the other jobs of their flows, as an array computed once: each partition is
 * then probed through its id index (an OR of the two conditions, or an IN over a subquery, read every partition
 * whole: test/history-plans.spec.ts).
 */
const WITH_THEIR_FLOWS = `ARRAY(SELECT id FROM target
        UNION SELECT f.id FROM background_jobs_history AS f WHERE f.flow_id = ANY(ARRAY(SELECT flow_id FROM target WHERE flow_id IS NOT NULL)))`;

/**
 * The CTEs that bring the failed and cancelled jobs of CTE \`target\` (id, flow_id) back from history to background_jobs
 * as they are, with the rest of their flows; \`returned\` holds their ids. Shared by retry() and the bulk retry.
 */
export const BRING_BACK = `back AS (
      DELETE FROM background_jobs_history AS h
      WHERE h.id = ANY(${WITH_THEIR_FLOWS})
      RETURNING h.*
    ), returned AS (
      INSERT INTO background_jobs SELECT * FROM back RETURNING id
    )`;

// The width ($3) of finish time a row's partition would span, by UTC: the row goes into whichever partition holds its
// finish time, whatever width made it; a new one spans this range clipped to the partitions around it (history.store.ts).
const LOWER = `date_trunc($3::text, c.finished_at, 'UTC')`;

export const HISTORY_SQL = {
  // Up to $2 rows the mover may take (finished more than $1 ms ago, and less than their kind's retention ago: $4
  // completed, $5 failed and cancelled), each with its finish time as ms since the epoch and the range of its width
  // ($3): the caller makes the partitions that are missing, then moves the rows with moveJobs. finished_at as text,
  // so that moveJobs can check that the row is still the one read here (a job retried and finished again since has
  // a new finish time, and maybe another partition).
  moveCandidates: `
    SELECT c.id::text AS id, c.finished_at::text AS finished_at,
      CASE WHEN c.status = 'completed' THEN 'completed' ELSE 'failed' END AS kind,
      extract(epoch FROM c.finished_at)::float8 * 1000 AS at_ms,
      to_char(${LOWER} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS lower,
      to_char(${LOWER} AT TIME ZONE 'UTC' + ('1 ' || $3::text)::interval, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS upper
    FROM (
      SELECT * FROM (${finishedBefore('completed', '$4')}
      UNION ALL ${finishedBefore('failed', '$5')}
      UNION ALL ${finishedBefore('cancelled', '$5')}) AS u
      ORDER BY u.finished_at LIMIT $2
    ) AS c`,

  // Moves the rows of $1 (ids) whose finish time is still $2 (as moveCandidates read it) into history ($3, $4: the retentions, as
  // MOVABLE_FLOW_JOB reads them), in one
  // statement: the DELETE's rows are the INSERT's. Rows another transaction holds are skipped (a retry, a bulk
  // action), and the next pass takes them. On one instance at a time (the history lock; the other passes find it
  // held and wait for their next turn).
  moveJobs: `
    WITH lock AS (SELECT pg_try_advisory_xact_lock(${ADVISORY_LOCK.history}) AS held),
    moved AS (
      DELETE FROM background_jobs AS j
      WHERE j.id = ANY(ARRAY(
          SELECT l.id FROM background_jobs AS l
          JOIN unnest($1::int8[], $2::text[]) AS c(id, finished_at) ON l.id = c.id AND l.finished_at = c.finished_at::timestamptz
          WHERE (SELECT held FROM lock)
          FOR UPDATE OF l SKIP LOCKED))
        AND j.status IN ('completed', 'failed', 'cancelled') AND ${MOVABLE_FLOW_JOB('$3', '$4')}
      RETURNING j.*
    ), kept AS (
      INSERT INTO background_jobs_history SELECT * FROM moved RETURNING 1
    )
    SELECT (SELECT held FROM lock) AS held, (SELECT count(*)::int FROM kept) AS moved`,

  // The partitions of both kinds, with their bounds (as text in UTC) and whether a DETACH ... CONCURRENTLY of
  // theirs was interrupted (PostgreSQL 14+: it must be finished with FINALIZE before anything else).
  partitions: `
    SELECT c.relname AS name, CASE WHEN p.relname = 'background_jobs_history_completed' THEN 'completed' ELSE 'failed' END AS kind,
      coalesce((to_jsonb(i) ->> 'inhdetachpending')::boolean, false) AS detach_pending,
      substring(pg_get_expr(c.relpartbound, c.oid) FROM $$FROM \\('([^']+)'\\)$$)::timestamptz AS lower,
      substring(pg_get_expr(c.relpartbound, c.oid) FROM $$TO \\('([^']+)'\\)$$)::timestamptz AS upper,
      now() AS now
    FROM pg_inherits AS i
    JOIN pg_class AS c ON c.oid = i.inhrelid
    JOIN pg_class AS p ON p.oid = i.inhparent
    WHERE p.oid IN (to_regclass('background_jobs_history_completed'), to_regclass('background_jobs_history_failed'))
    ORDER BY 5`,

  // PostgreSQL 14 brought DETACH PARTITION ... CONCURRENTLY.
  serverVersion: `SELECT current_setting('server_version_num')::int AS version`,

  // Before a partition goes: the attempt history of its jobs (background_job_attempts is not partitioned).
  forgetPartitionAttempts: (partition: string) => `DELETE FROM background_job_attempts AS a USING ${partition} AS h WHERE a.job_id = h.id`,

  // retry() of a failed or cancelled job that history holds: it goes back to background_jobs as it is, with the
  // rest of its flow (a retried flow job brings back what failed because of it, which flow.sql.ts reads there),
  // then the usual retry runs on it. The insert fires the NOTIFY trigger: a spurious wake-up, not a claimable job.
  bringBack: `
    WITH target AS (
      SELECT h.id, h.flow_id FROM background_jobs_history AS h WHERE h.id = ANY($1::int8[]) AND h.status IN ('failed', 'cancelled')
    ), ${BRING_BACK}
    SELECT count(*)::int AS n FROM returned`,
} as const;

/** A partition's range of finish times, as ms since the epoch: [lower, upper). */
export interface PartitionRange {
  lower: number;
  upper: number;
}

/**
 * Where a new partition for a row finished at `at` goes, given the kind's `existing` partitions (none of which holds
 * `at`): the range of the width the mover runs with (`widthLower`, `widthUpper`), clipped to the partitions around
 * it. Partitions made with another width (before `partitionWidth` changed, or by an instance of a rolling deploy that
 * runs the other one) are never overlapped: a day partition next to hourly ones spans the hours they leave free, and
 * an hour inside an existing day partition needs no new one (its rows go there).
 */
export function newPartitionRange(at: number, widthLower: number, widthUpper: number, existing: readonly PartitionRange[]): PartitionRange {
  let lower = widthLower;
  let upper = widthUpper;
  for (const p of existing) {
    if (p.upper <= at) lower = Math.max(lower, p.upper);
    else if (p.lower > at) upper = Math.min(upper, p.lower);
    else throw new Error(`history: a partition [${iso(p.lower)}, ${iso(p.upper)}) already holds ${iso(at)}`);
  }
  return { lower, upper };
}

/**
 * The suffix of a partition starting at `lower` (ms): YYYYMM at the start of a month of a 'month' width, YYYYMMDD at a
 * UTC midnight of a 'day' or 'week' one, else YYYYMMDD_HH. Partitions never overlap, so two of them never start at
 * the same instant, and each form names one instant: names never collide, whatever widths made them.
 */
export function partitionSuffix(width: HistoryPartitionWidth, lower: number): string {
  const d = new Date(lower);
  if (d.getUTCMinutes() !== 0 || d.getUTCSeconds() !== 0 || d.getUTCMilliseconds() !== 0) {
    throw new Error(`history: a partition bound off the hour: ${iso(lower)}`);
  }
  const [y, m, day, h] = [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours()].map((n, i) => String(n).padStart(i === 0 ? 4 : 2, '0'));
  if (width === 'month' && day === '01' && h === '00') return `${y}${m}`;
  if ((width === 'day' || width === 'week') && h === '00') return `${y}${m}${day}`;
  return `${y}${m}${day}_${h}`;
}

/** A bound as the DDL writes it: 2026-12-06T10:00:00Z. */
export function partitionBound(ms: number): string {
  return iso(ms).replace(/\.\d{3}Z$/, 'Z');
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** A partition's table name: only these characters ever reach the DDL below. */
const PARTITION_NAME = /^background_jobs_history_(completed|failed)_p[0-9_]{6,11}$/;
const BOUND = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

export function partitionName(kind: HistoryKind, suffix: string): string {
  const name = `${HISTORY_PARENT[kind]}_p${suffix}`;
  if (!PARTITION_NAME.test(name)) throw new Error(`history: not a partition name: ${name}`);
  return name;
}

/**
 * Makes partition `name` of `kind` for [lower, upper): a table of its own first, then attached, which takes only a
 * SHARE UPDATE EXCLUSIVE lock on the parent (CREATE TABLE ... PARTITION OF would take an ACCESS EXCLUSIVE one, and
 * wait behind, then stop, every read of history). Its indexes come with the attach. Under a short lock_timeout, so
 * that a long read of history makes the mover try again later rather than queue everyone else behind it.
 */
export function createPartition(kind: HistoryKind, name: string, lower: string, upper: string): string {
  if (!PARTITION_NAME.test(name) || !BOUND.test(lower) || !BOUND.test(upper)) throw new Error(`history: bad partition ${name} [${lower}, ${upper})`);
  return `
    SET LOCAL lock_timeout = '2s';
    CREATE TABLE IF NOT EXISTS ${name} (LIKE ${HISTORY_PARENT[kind]});
    ALTER TABLE ${HISTORY_PARENT[kind]} ATTACH PARTITION ${name} FOR VALUES FROM ('${lower}') TO ('${upper}')`;
}

/**
 * Takes partition `name` out of its parent. PostgreSQL 14+: CONCURRENTLY, which never blocks reads or writes of
 * history (it waits for the transactions that may see the partition instead), must run outside a transaction, and
 * needs no default partition (history has none). `finalize` ends one that was interrupted. PostgreSQL 13: a plain
 * DETACH, which takes an ACCESS EXCLUSIVE lock on the parent for an instant, under a short lock_timeout.
 */
export function detachPartition(kind: HistoryKind, name: string, how: 'concurrently' | 'finalize' | 'locked'): string {
  if (!PARTITION_NAME.test(name)) throw new Error(`history: not a partition name: ${name}`);
  const parent = HISTORY_PARENT[kind];
  if (how === 'locked') return `SET LOCAL lock_timeout = '2s'; ALTER TABLE ${parent} DETACH PARTITION ${name}`;
  return `ALTER TABLE ${parent} DETACH PARTITION ${name} ${how === 'concurrently' ? 'CONCURRENTLY' : 'FINALIZE'}`;
}

export function dropPartition(name: string): string {
  if (!PARTITION_NAME.test(name)) throw new Error(`history: not a partition name: ${name}`);
  return `DROP TABLE IF EXISTS ${name}`;
}
