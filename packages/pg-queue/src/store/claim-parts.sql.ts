// The parts the claims share (claim.sql.ts, claim-keyed.sql.ts): the limited claim's frame, the walks of the claim
// index in a claim's order, the checks of a stopped queue and of a blocked key.
import { keyBlocked, MS } from './shared.sql.js';

/**
 * A claimed row's created_at as epoch milliseconds, or NULL when it equals run_at (a job enqueued to run at once:
 * the worker takes run_at_ms). Most rows skip the second conversion: 2% of the claim's server time.
 */
export const CREATED_AT_MS = `CASE WHEN j.created_at <> j.run_at THEN date_part('epoch', j.created_at) * 1000 END AS created_at_ms`;

/**
 * The queue's global concurrency in force, as the CTE global_limit: its row's runtime override (background_queues.limits:
 * a number, or JSON null for none) over $5, the worker's value (the decorator's, or the override as its process last
 * read it). Read in the claim, under the queue's lock, not taken from the worker's copy: a process reads the limits
 * again on a notice and every 500 ms, and one whose notice was lost (its LISTEN connection cut) claimed 1.1 s after
 * a change from 4 to 1 under the old 4 (the simulation's seed 659653567: two runs at once). The copy still decides
 * which claim a worker sends (a queue with no limit at all sends the plain claim until it hears of one).
 */
const GLOBAL_LIMIT = `global_limit AS (
      SELECT CASE WHEN l.v ? 'globalConcurrency' THEN (l.v ->> 'globalConcurrency')::int ELSE $5::int END AS n
      FROM (SELECT (SELECT q.limits FROM background_queues AS q WHERE q.queue_name = $1) AS v) AS l
    `;

/**
 * The claim of a queue with limits, in two variants that differ only in how they pick candidates (see
 * claimLimitedJobs and claimKeyedJobs in CLAIM_SQL below).
 */
export function limitedClaim(candidates: string, limited: string, keysBusy: string, keyCursor: string, afterClaim = '', keylessSeen?: string, readAhead?: LimitedReadAhead): string {
  // A keyed or fair claim also says whether it found due jobs without a key (keylessSeen in claim-keyed.sql.ts).
  const seen = keylessSeen === undefined ? '' : `, ${keylessSeen} AS keyless_seen`;
  const held = readAhead === undefined ? '' : ', buffered';
  const update = (ids: string, buffered: boolean) => `
      UPDATE background_jobs AS j
      SET status = 'processing', ${buffered ? '' : 'attempts = j.attempts + 1, '}fence_token = j.fence_token + 1, locked_by = $3,
          locked_at = statement_timestamp(), lease_expires_at = now() + ${buffered ? readAhead!.bufferLeaseMs : '$4'}::int ${MS}, updated_at = now(),
          limited = ${limited}, buffered = ${buffered}
      WHERE j.id = ANY(ARRAY(${ids})) AND j.status = 'queued'
      RETURNING j.id, j.payload, j.attempts${buffered ? ' + 1 AS attempts' : ''}, j.fence_token, j.max_attempts, j.priority, date_part('epoch', now() - j.run_at) * 1000 AS wait_ms,
        date_part('epoch', j.run_at) * 1000 AS run_at_ms, ${CREATED_AT_MS}, j.concurrency_key,
        j.trace_context${readAhead === undefined ? '' : `, ${buffered} AS buffered`}`;
  // With read-ahead: the candidates in the claim's order, the first startNow started (charged, leased for $4 ms), the
  // rest read ahead (buffered: uncharged, leased for the short buffer lease), as the plain claim splits them.
  const claimed =
    readAhead === undefined
      ? `    ), claimed AS (${update('SELECT id FROM candidates', false)}`
      : `    ), numbered AS (
      SELECT c.id, row_number() OVER (ORDER BY ${readAhead.order}) AS rn FROM candidates AS c ${readAhead.join}
    ), started AS (${update(`SELECT id FROM numbered WHERE rn <= ${readAhead.startNow}::int`, false)}
    ), held AS (${update(`SELECT id FROM numbered WHERE rn > ${readAhead.startNow}::int`, true)}
    ), claimed AS (
      SELECT * FROM started UNION ALL SELECT * FROM held`;
  // Its rows in the claim's order: the worker starts its buffered jobs in the order they come back.
  const rows = readAhead === undefined ? 'claimed' : '(SELECT c.* FROM claimed AS c JOIN numbered AS n ON n.id = c.id ORDER BY n.rn) AS claimed';
  return `
    WITH RECURSIVE ${GLOBAL_LIMIT}), running AS (
      -- The queue's running limited jobs, counted only under a global cap (nothing else reads the count: a rate limit,
      -- per-key caps and fair share alone skip this read of every running job's entry).
      SELECT CASE WHEN (SELECT n FROM global_limit) IS NOT NULL THEN
        (SELECT count(*)::int FROM background_jobs WHERE queue_name = $1 AND status = 'processing' AND limited) ELSE 0 END AS n
    ), recent AS (
      SELECT coalesce(sum(n), 0)::int AS n, min(started_at) AS oldest FROM background_queue_starts
      WHERE queue_name = $1 AND started_at > statement_timestamp() - $7::int8 ${MS}
    ), allowance AS (
      SELECT greatest(0, least($2::int, coalesce(g.n - r.n, $2::int), coalesce($6::int - w.n, $2::int))) AS n
      FROM global_limit AS g, running AS r, recent AS w
${candidates}${claimed}
${afterClaim}    ), logged AS (
      INSERT INTO background_queue_starts (queue_name, started_at, n)
      SELECT $1, statement_timestamp(), count(*) FROM claimed HAVING $6::int IS NOT NULL AND count(*) > 0
    ), forgotten AS (
      DELETE FROM background_queue_starts WHERE queue_name = $1 AND started_at <= statement_timestamp() - $7::int8 ${MS}
    ), outcome AS (
      SELECT (SELECT count(*)::int FROM claimed) AS claimed, a.n AS allowed, r.n AS running, w.n AS started, w.oldest
      FROM allowance AS a, running AS r, recent AS w
    )
    SELECT id, payload, attempts, fence_token, max_attempts, priority, wait_ms, run_at_ms, created_at_ms, trace_context, ${keyCursor} AS key_cursor,
      NULL::float8 AS next_due_ms, NULL::float8 AS rate_wait_ms, NULL::boolean AS at_capacity${seen}${held} FROM ${rows}
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
      ((o.claimed = o.allowed AND o.running + o.claimed >= (SELECT n FROM global_limit))${keysBusy})
        -- in the claim index's order: a bare EXISTS was planned as a sequential scan (many queued rows expected)
        AND (SELECT priority FROM background_jobs WHERE queue_name = $1 AND status = 'queued' ORDER BY priority DESC LIMIT 1) IS NOT NULL${seen}${held && ', NULL::boolean'}
    FROM outcome AS o
    WHERE o.claimed < $2`;
}

/**
 * A limited claim that reads ahead (the fair claim of a queue without caps or a rate limit): the parameters of the jobs
 * that start now and of the buffer's lease, and the claim's order of its candidates (`order`, over `join`ed CTEs).
 */
export interface LimitedReadAhead {
  startNow: string;
  bufferLeaseMs: string;
  order: string;
  join: string;
}

/**
 * The key a keyed claim's next turn starts after: the last key it claimed from, in turn order (the greatest
 * after the cursor, else the greatest up to it), compared by PostgreSQL, in the index's collation.
 */
export const KEY_CURSOR = `coalesce((SELECT coalesce(max(concurrency_key) FILTER (WHERE concurrency_key > $9), max(concurrency_key)) FROM claimed), $9)`;

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
export function queuedPriorities(atLeast?: string): string {
  const floor = (column: string) => (atLeast === undefined ? '' : ` AND ${column} >= ${atLeast}`);
  return `(SELECT priority FROM background_jobs WHERE queue_name = $1 AND status = 'queued'${floor('priority')} ORDER BY priority DESC LIMIT 1)
      UNION ALL
      SELECT (SELECT b.priority FROM background_jobs AS b
              WHERE b.queue_name = $1 AND b.status = 'queued' AND b.priority < p.priority${floor('b.priority')} ORDER BY b.priority DESC LIMIT 1)
      FROM priorities AS p WHERE p.priority IS NOT NULL`;
}

/**
 * The single-row probe of the queue's row that stops a claim: paused, blocked by a partner's 429 (RateLimitedError),
 * or, for a claim without the per-key check (`keyBlocks` false), any of its keys blocked (key_blocked_until: the worker
 * then claims with the key-blocked variant, which skips only the blocked keys' jobs). Uncorrelated: run once per statement.
 *
 * And the limits stored for the queue at runtime are not the ones the worker chose this claim by (`storedLimits`: the
 * parameter carrying its copy of background_queues.limits as last read, JSON; NULL: none stored). The row owns the
 * limits; a process's copy lags by up to a re-read (half a second), longer when its reads fail while its claims do not
 * (a connection cut, a pool the app's lock waits fill). A worker that still believed a limit was removed claimed with
 * the plain claim, which counts nothing, beside the limited claims of the others (the simulation's seed 1998548486: two
 * jobs at once under a global concurrency of 1). Its claims now take nothing until its copy is the row's again.
 */
export function queueStopped(keyBlocks: boolean, storedLimits: string): string {
  return `(EXISTS (SELECT 1 FROM background_queues WHERE queue_name = $1 AND (paused OR blocked_until > now()${keyBlocks ? '' : ' OR key_blocked_until > now()'}))
        OR (SELECT limits FROM background_queues WHERE queue_name = $1) IS DISTINCT FROM ${storedLimits}::jsonb)`;
}

/** The key `key` (an SQL expression) is not blocked by a partner's 429 now: background_queue_key_blocks' primary key, one probe. */
export const keyNotBlocked = (key: string) => `NOT ${keyBlocked(key)}`;

/** The per-row check of the key-blocked variants: the job's key is not blocked. */
const KEY_NOT_BLOCKED = (alias: string) => keyNotBlocked(`${alias}.concurrency_key`);

/**
 * The order in which a claim takes a queue's due jobs within each priority (within each key, for the keyed and fair
 * claims). The worker picks it per claim (ClaimLoop), from what it knows of the queue:
 * - 'fifo': the earliest run_at first, then the lowest id. The plain claim and the limited claims of a queue without
 *   LIFO: their statements and the claim index exactly as they were before LIFO existed, so such a queue pays nothing.
 * - 'lifo': the queue's handler has `lifo: true` (README, LIFO): the latest run_at first (the job due last: for jobs
 *   enqueued to run at once, the newest), then the highest id. The same index (claim index, keyed claim index) walked
 *   backwards from now(): the range `run_at <= now()` bounds it as it bounds the forward walk.
 * - 'mixed': a queue whose handler is FIFO but that has had jobs enqueued with `lifo: true` (background_queues.lifo_jobs,
 *   set by the first such enqueue and read by every worker of the queue with its limits: QueueLimitsKeeper). Its LIFO
 *   jobs come first, newest first, through background_jobs_lifo_idx (background_jobs_lifo_key_idx per key), an index of
 *   LIFO jobs only, walked backwards; then its other jobs, oldest first, through the claim index (LIFO rows filtered
 *   out). Two ordered walks appended, each locking only what it returns (SKIP LOCKED under the LIMIT).
 * A job's order is stored at enqueue (`lifo`, and run_at): nothing is computed per claim but which walk to take.
 */
export type ClaimOrder = 'fifo' | 'lifo' | 'mixed';

/**
 * The due rows of one priority (or key) in the claim's order, as the body of a LATERAL subquery: `select` the select
 * list, `where` the conditions (on alias j), `limit` the bound, locked FOR UPDATE SKIP LOCKED unless `lock` is false.
 * 'fifo' is the text the claims always had.
 */
export function orderedDue(select: string, where: string, limit: string, order: ClaimOrder, lock = true, indent = '        '): string {
  const locking = lock ? `\n${indent}FOR UPDATE SKIP LOCKED` : '';
  const walk = (extra: string, direction: '' | ' DESC') =>
    `SELECT ${select} FROM background_jobs AS j
${indent}WHERE ${where}${extra}
${indent}ORDER BY j.run_at${direction}, j.id${direction}
${indent}LIMIT ${limit}${locking}`;
  if (order === 'fifo') return walk('', '');
  if (order === 'lifo') return walk('', ' DESC');
  return `SELECT * FROM (
${indent}  ${walk(' AND j.lifo', ' DESC').replaceAll(`\n${indent}`, `\n${indent}  `)}
${indent}) AS lifo_first
${indent}UNION ALL
${indent}SELECT * FROM (
${indent}  ${walk(' AND j.lifo IS NOT TRUE', '').replaceAll(`\n${indent}`, `\n${indent}  `)}
${indent}) AS fifo_after
${indent}LIMIT ${limit}`;
}

/** The candidates of the plain and the limited claims: see claimJobs and claimLimitedJobs (`storedLimits`: queueStopped). */
export function dueCandidates(limit: string, storedLimits: string, lastAttempt = false, keyBlocks = false, order: ClaimOrder = 'fifo'): string {
  return `priorities AS (
      ${queuedPriorities()}
    ), candidates AS (
      SELECT c.id${lastAttempt ? ', c.last_attempt' : ''} FROM priorities AS p CROSS JOIN LATERAL (
        ${orderedDue(
          `id${lastAttempt ? ', j.attempts + 1 >= j.max_attempts AS last_attempt' : ''}`,
          `j.queue_name = $1 AND j.status = 'queued' AND j.priority = p.priority AND j.run_at <= now()${keyBlocks ? `
          AND (j.concurrency_key IS NULL OR ${KEY_NOT_BLOCKED('j')})` : ''}`,
          limit,
          order,
        )}
      ) AS c
      WHERE NOT ${queueStopped(keyBlocks, storedLimits)}
      LIMIT ${limit}
`;
}
