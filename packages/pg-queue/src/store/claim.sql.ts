// Claim: the plain claim (read-ahead included) and the two claims of a limited queue, which run inside
// beginWithQueueLock's transaction.
import { LIMIT_LOCK_SPACE } from '../pg-queue.constants.js';
import { MS } from './shared.sql.js';

/**
 * A claimed row's created_at as epoch milliseconds, or NULL when it equals run_at (a job enqueued to run at once:
 * the worker takes run_at_ms). Most rows skip the second conversion: 2% of the claim's server time.
 */
const CREATED_AT_MS = `CASE WHEN j.created_at <> j.run_at THEN date_part('epoch', j.created_at) * 1000 END AS created_at_ms`;

/**
 * The claim of a queue with limits, in two variants that differ only in how they pick candidates (see
 * claimLimitedJobs and claimKeyedJobs in CLAIM_SQL below).
 */
function limitedClaim(candidates: string, limited: string, keysBusy: string, keyCursor: string, afterClaim = ''): string {
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
 */
export function queueStopped(keyBlocks: boolean): string {
  return `EXISTS (SELECT 1 FROM background_queues WHERE queue_name = $1 AND (paused OR blocked_until > now()${keyBlocks ? '' : ' OR key_blocked_until > now()'}))`;
}

/** The per-row check of the key-blocked variants: the job's key is not blocked (background_queue_key_blocks' primary key). */
const KEY_NOT_BLOCKED = (alias: string) =>
  `NOT EXISTS (SELECT 1 FROM background_queue_key_blocks AS kb WHERE kb.queue_name = $1 AND kb.concurrency_key = ${alias}.concurrency_key AND kb.blocked_until > now())`;

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
function orderedDue(select: string, where: string, limit: string, order: ClaimOrder, lock = true, indent = '        '): string {
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

function dueCandidates(limit: string, lastAttempt = false, keyBlocks = false, order: ClaimOrder = 'fifo'): string {
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
      WHERE NOT ${queueStopped(keyBlocks)}
      LIMIT ${limit}
`;
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
function plainClaim(observed: boolean, keyBlocks = false, order: ClaimOrder = 'fifo'): string {
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
    WITH RECURSIVE ${dueCandidates('$2', true, keyBlocks, order)}    ), numbered AS (
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
    ${
      order === 'fifo'
        ? `(SELECT id, payload, attempts, fence_token, max_attempts, priority, buffered, run_at_ms, created_at_ms${extras.map((c) => `, ${c}`).join('')}, NULL::float8 AS next_due_ms FROM claimed
     ORDER BY priority DESC, run_at_ms, id)`
        : // LIFO: the walk's own order (a LIFO job of a priority before its FIFO jobs), which no column of the rows says.
          `(SELECT c.id, c.payload, c.attempts, c.fence_token, c.max_attempts, c.priority, c.buffered, c.run_at_ms, c.created_at_ms${extras.map((x) => `, c.${x}`).join('')}, NULL::float8 AS next_due_ms
     FROM claimed AS c JOIN numbered AS n ON n.id = c.id
     ORDER BY n.rn)`
    }
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL${extras.map(() => ', NULL').join('')},
      (SELECT greatest(0, extract(epoch FROM run_at - clock_timestamp()) * 1000)::float8
       FROM background_jobs WHERE queue_name = $1 AND status = 'queued' AND run_at > created_at AND run_at > now()
       ORDER BY run_at LIMIT 1)
    WHERE (SELECT count(*) FROM claimed) < $2`;
}

/**
 * The keys with queued jobs in turn order from a claimer's cursor ($9), as CTEs (after, upto, turn) that follow
 * another CTE: see claimKeyedJobs.
 */
const KEY_TURN = `    ), after AS (
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
`;

/** The due keyless jobs of a keyed (or fair) claim, as a CTE that follows another: see claimKeyedJobs. */
const KEYLESS = `    ), keyless AS (
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
`;

/**
 * What a key of a fair claim's window offers: its due jobs in the claim's order, numbered (rn: the i-th job of a key
 * of weight w stands at pass + i / w), as many as its room and the bound allow.
 */
function fairOffer(order: ClaimOrder): string {
  const limit = 'least(w.room, greatest(0, coalesce(floor(((SELECT u FROM fair_bound) - w.pass) * w.weight + 1e-9)::int, 2147483647)))';
  const due = `j.queue_name = $1 AND j.status = 'queued' AND j.concurrency_key = w.k AND j.run_at <= now()`;
  if (order === 'fifo') {
    return `
        SELECT id, row_number() OVER (ORDER BY j.run_at, j.id) AS rn FROM background_jobs AS j
        WHERE ${due}
        ORDER BY j.run_at, j.id
        LIMIT ${limit}`;
  }
  if (order === 'lifo') {
    return `
        SELECT id, row_number() OVER (ORDER BY j.run_at DESC, j.id DESC) AS rn FROM background_jobs AS j
        WHERE ${due}
        ORDER BY j.run_at DESC, j.id DESC
        LIMIT ${limit}`;
  }
  // The two walks appended (a subquery's rows come out in the order its Append makes them), then numbered.
  return `
        SELECT o.id, row_number() OVER () AS rn FROM (
          ${orderedDue('id', due, limit, 'mixed', false, '          ')}
        ) AS o`;
}

/** The fewest keys a fair claim compares (its window): more than a claim of one or two free slots would look at. */
export const FAIR_WINDOW_KEYS = 16;

/**
 * The candidates of a fair claim (claimFairJobs), as CTEs after KEY_TURN: stride scheduling over the queue's keys.
 * Each key has a pass (background_fair_passes: the virtual time its next job stands at); the i-th due job of a key of
 * weight w stands at pass + i / w, and the claim takes the lowest (earliest in turn on ties), so while keys have work
 * each gets starts in proportion to its weight, and a key alone with work takes every slot. A key without a pass, or
 * whose pass fell behind the queue's clock (background_queues.fair_clock: the last job given out) by more than one,
 * starts one behind the clock: an idle key banks no credit, and one that comes back is served within about a job.
 * Weights: stored at runtime, else the option's ($10), else the default ($11). The claim compares a window of the
 * keys in turn order that have a due job, no block from a partner's 429 and a free per-key slot ($8, NULL: no cap; a key's running jobs counted in
 * every process under the queue's lock): the allowance's worth, at least FAIR_WINDOW_KEYS. Jobs without a key are one
 * more key ('') of the default weight, read from the first due entries of the plain claim index as the keyed claim
 * reads them. The ids are read without locks and locked once chosen, skipping rows another statement holds (another
 * claim of the queue waits for the queue's lock; a cancel or an operator's change may hold one). FAIR_PASSES moves
 * the passes and the clock past what the claim took.
 */
const fairCandidates = (order: ClaimOrder) => `${KEY_TURN}    ), fair_clock AS (
      SELECT coalesce((SELECT q.fair_clock FROM background_queues AS q WHERE q.queue_name = $1), 0) AS v
    ), fair_window AS (
      SELECT f.k, f.weight, row_number() OVER () AS pos,
        greatest(coalesce((SELECT p.pass FROM background_fair_passes AS p WHERE p.queue_name = $1 AND p.key = f.k), c.v - 1), c.v - 1) AS pass,
        least((SELECT n FROM allowance), greatest(0, coalesce($8::int, 2147483647) - f.running)) AS room
      FROM (
        -- Keys in turn with a due job (the first of the key's queued jobs by run_at, one probe) and a free per-key
        -- slot: a key whose jobs are all scheduled later, or at its cap, is passed over, not given a place.
        SELECT t.k, r.n AS running,
          coalesce((SELECT w.weight FROM background_queue_weights AS w WHERE w.queue_name = $1 AND w.key = t.k), ($10::jsonb ->> t.k)::int, $11::int) AS weight
        FROM turn AS t
        -- A key's running jobs, counted only with a per-key cap ($8): without one the count is a one-time-filtered 0.
        CROSS JOIN LATERAL (SELECT count(*)::int AS n FROM background_jobs AS r
                            WHERE $8::int IS NOT NULL AND r.queue_name = $1 AND r.status = 'processing' AND r.limited AND r.concurrency_key = t.k) AS r
        WHERE r.n < coalesce($8::int, 2147483647)
          -- A key blocked by a partner's 429 (background_queue_key_blocks) is passed over too.
          AND NOT EXISTS (SELECT 1 FROM background_queue_key_blocks AS kb WHERE kb.queue_name = $1 AND kb.concurrency_key = t.k AND kb.blocked_until > now())
          AND (SELECT j.run_at FROM background_jobs AS j
               WHERE j.queue_name = $1 AND j.status = 'queued' AND j.concurrency_key = t.k ORDER BY j.run_at LIMIT 1) <= now()
        LIMIT greatest((SELECT n FROM allowance), ${FAIR_WINDOW_KEYS})
      ) AS f, fair_clock AS c
    ), fair_bound AS (
      -- Every window key has a due job: with at least the allowance's worth of keys, the jobs taken all stand at or
      -- below the allowance-th lowest first job, so no key need offer jobs past it (a claim of 50 over 50 keys read
      -- 2,500 rows to take 50 without this bound).
      SELECT CASE WHEN count(*) >= (SELECT n FROM allowance) THEN max(v) END AS u
      FROM (SELECT pass + 1.0 / weight AS v FROM fair_window ORDER BY 1 LIMIT (SELECT n FROM allowance)) AS x
    ), offered AS (
      SELECT c.id, w.k, w.pos, w.pass + c.rn::float8 / w.weight AS vt FROM fair_window AS w CROSS JOIN LATERAL (${fairOffer(order)}
      ) AS c
      UNION ALL
      SELECT f.id, '', 0, kp.pass + (row_number() OVER (ORDER BY f.priority DESC, f.run_at, f.id))::float8 / $11::int
      FROM (
        SELECT id, concurrency_key, priority, run_at FROM background_jobs AS j
        WHERE j.queue_name = $1 AND j.status = 'queued' AND j.run_at <= now()
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT 200
      ) AS f, (
        SELECT greatest(coalesce((SELECT p.pass FROM background_fair_passes AS p WHERE p.queue_name = $1 AND p.key = ''), c.v - 1), c.v - 1) AS pass
        FROM fair_clock AS c
      ) AS kp
      WHERE f.concurrency_key IS NULL
    ), candidates AS (
      SELECT k.id FROM background_jobs AS k
      WHERE k.id IN (SELECT id FROM offered ORDER BY vt, pos LIMIT (SELECT n FROM allowance)) AND k.status = 'queued'
        AND NOT ${queueStopped(true)}
      FOR UPDATE OF k SKIP LOCKED
`;

/** After a fair claim: each key served moves to the virtual time of its last job taken; the clock to the latest. */
const FAIR_PASSES = `    ), fair_served AS (
      SELECT o.k, max(o.vt) AS vt FROM claimed AS c JOIN offered AS o ON o.id = c.id GROUP BY o.k
    ), passes_moved AS (
      INSERT INTO background_fair_passes (queue_name, key, pass, updated_at)
      SELECT $1, k, vt, now() FROM fair_served
      ON CONFLICT (queue_name, key) DO UPDATE SET pass = EXCLUDED.pass, updated_at = now()
    ), clock_moved AS (
      INSERT INTO background_queues (queue_name, fair_clock)
      SELECT $1, max(vt) FROM fair_served HAVING count(*) > 0
      ON CONFLICT (queue_name) DO UPDATE SET fair_clock = greatest(coalesce(background_queues.fair_clock, 0), EXCLUDED.fair_clock)
`;

/** The per-key slots a keyed claim's key `t.k` has free: $8 less its running jobs (counted under the queue's lock). */
const KEY_ROOM = `greatest(0, $8::int - (SELECT count(*) FROM background_jobs AS r
                                     WHERE r.queue_name = $1 AND r.status = 'processing' AND r.limited AND r.concurrency_key = t.k))`;

/** The claim of a queue with concurrencyPerKey (see claimKeyedJobs in CLAIM_SQL), in `order` within each key. */
function keyedClaim(order: ClaimOrder): string {
  const unblocked = `SELECT k FROM turn WHERE NOT EXISTS (
        SELECT 1 FROM background_queue_key_blocks AS kb WHERE kb.queue_name = $1 AND kb.concurrency_key = turn.k AND kb.blocked_until > now())`;
  const due = `j.queue_name = $1 AND j.status = 'queued' AND j.concurrency_key = t.k AND j.run_at <= now()`;
  // 'fifo': the text this claim always had. Otherwise the key's room is computed once, beside the key (the walks use it thrice).
  const keyed =
    order === 'fifo'
      ? `SELECT c.id FROM (${unblocked}) AS t CROSS JOIN LATERAL (
        ${orderedDue('id', due, KEY_ROOM, 'fifo')}
      ) AS c`
      : `SELECT c.id FROM (SELECT t.k, ${KEY_ROOM} AS room FROM (${unblocked}) AS t) AS t CROSS JOIN LATERAL (
        ${orderedDue('id', due, 't.room', order)}
      ) AS c`;
  // (Each key gives its newest due jobs first with LIFO: ClaimOrder. The statement's comment is kept as it was, so that
  // the 'fifo' statement is byte for byte the one before LIFO.)
  return limitedClaim(`
${KEY_TURN}    ), keyed AS (
      -- Each key in turn gives its oldest due jobs, as many as it has free slots ($8 less its running jobs).
      -- A key blocked by a partner's 429 (background_queue_key_blocks) gives none: one probe per key, not per row.
      ${keyed}
      LIMIT (SELECT n FROM allowance)
${KEYLESS}    ), candidates AS (
      SELECT id FROM (SELECT id FROM keyed UNION ALL SELECT id FROM keyless) AS c
      WHERE NOT ${queueStopped(true)}
      LIMIT (SELECT n FROM allowance)
`, 'true', ` OR (o.claimed < o.allowed AND EXISTS (\n        SELECT 1 FROM background_jobs AS r WHERE r.queue_name = $1 AND r.status = 'processing' AND r.limited AND r.concurrency_key IS NOT NULL))`, KEY_CURSOR);
}

/** The claim of a queue with fairness (see claimFairJobs in CLAIM_SQL), each key offering its due jobs in `order`. */
function fairClaim(order: ClaimOrder): string {
  return limitedClaim(`
${fairCandidates(order)}`, 'true', ` OR (o.claimed < o.allowed AND $8::int IS NOT NULL AND EXISTS (\n        SELECT 1 FROM background_jobs AS r WHERE r.queue_name = $1 AND r.status = 'processing' AND r.limited AND r.concurrency_key IS NOT NULL))`, KEY_CURSOR, FAIR_PASSES);
}

export const CLAIM_SQL = {
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
  // The same two while a key of the queue is blocked by a partner's 429 (RateLimitedError with a key; the worker knows
  // from its queue's row, QueueLimitsKeeper): the jobs of blocked keys are passed over, one primary-key probe of
  // background_queue_key_blocks per keyed candidate. The claims above claim nothing while any key is blocked.
  claimJobsKeyBlocked: plainClaim(false, true),
  claimJobsObservedKeyBlocked: plainClaim(true, true),

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
  // claimLimitedJobs while a key of the queue is blocked (as claimJobsKeyBlocked).
  claimLimitedJobsKeyBlocked: limitedClaim(`
    ), ${dueCandidates('(SELECT n FROM allowance)', false, true)}`, 'CASE WHEN $5::int IS NOT NULL THEN true END', '', 'NULL::text'),

  // The claim of a queue with concurrencyPerKey ($8; and $9, this worker's key cursor): claimLimitedJobs' locks,
  // limits and answers, with candidates taken key by key in turn from the cursor (a round robin over the keys
  // that have queued jobs, so one key's backlog cannot starve the others), each key giving its oldest due jobs
  // up to its free slots (its running jobs are counted through background_jobs_limited_idx, under the same
  // lock). The worker moves its cursor to the last key it claimed from. at_capacity is also set when the claim
  // came back short while keyed jobs run: a key's slot frees when one of them ends.
  claimKeyedJobs: keyedClaim('fifo'),
  // The claim of a queue with fairness (fairCandidates, FAIR_PASSES): claimKeyedJobs' lock, limits, answers and
  // cursor, with $8 the per-key cap (NULL: none), $10 the option's weights (jsonb), $11 the default weight.
  claimFairJobs: fairClaim('fifo'),

  // The claims of a queue with LIFO (ClaimOrder): a queue whose handler has `lifo: true` ('lifo'), or that has LIFO jobs
  // ('mixed'). The same statements with the other walk; a queue without LIFO never sends them.
  ...ordered('lifo'),
  ...ordered('mixed'),
} as const;

/** The claims above in another order, named with its suffix (claimJobsLifo, claimKeyedJobsMixed, ...). */
function ordered<O extends 'lifo' | 'mixed'>(order: O) {
  const suffix = order === 'lifo' ? 'Lifo' : 'Mixed';
  const limited = (keyBlocks: boolean) =>
    limitedClaim(`
    ), ${dueCandidates('(SELECT n FROM allowance)', false, keyBlocks, order)}`, 'CASE WHEN $5::int IS NOT NULL THEN true END', '', 'NULL::text');
  return {
    [`claimJobs${suffix}`]: plainClaim(false, false, order),
    [`claimJobsObserved${suffix}`]: plainClaim(true, false, order),
    [`claimJobsKeyBlocked${suffix}`]: plainClaim(false, true, order),
    [`claimJobsObservedKeyBlocked${suffix}`]: plainClaim(true, true, order),
    [`claimLimitedJobs${suffix}`]: limited(false),
    [`claimLimitedJobsKeyBlocked${suffix}`]: limited(true),
    [`claimKeyedJobs${suffix}`]: keyedClaim(order),
    [`claimFairJobs${suffix}`]: fairClaim(order),
  } as Record<`${'claimJobs' | 'claimJobsObserved' | 'claimJobsKeyBlocked' | 'claimJobsObservedKeyBlocked' | 'claimLimitedJobs' | 'claimLimitedJobsKeyBlocked' | 'claimKeyedJobs' | 'claimFairJobs'}${typeof suffix}`, string>;
}

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
 * beginWithQueueLock as the workers take it: a try (its last statement answers `locked`), never a wait. A claim
 * waiting on the lock held its connection of the leases pool, and a process holding the lock frozen (up to
 * LIMIT_LOCK_IDLE_MS) blocked every limited queue's claim on it: with two limited queues they held both connections,
 * and heartbeats and outcome writes waited behind them until leases lapsed (the simulation's seeds 31-33).
 */
export function beginWithQueueTryLock(queueKey: number): string {
  if (!Number.isInteger(queueKey)) throw new TypeError(`queue lock key must be an integer, got ${queueKey}`);
  return `BEGIN; SET LOCAL idle_in_transaction_session_timeout = ${LIMIT_LOCK_IDLE_MS}; SELECT pg_try_advisory_xact_lock(${LIMIT_LOCK_SPACE}, ${queueKey}) AS locked`;
}
