// The claims of a queue whose jobs have keys: concurrencyPerKey (keyedClaim) and fair share (fairClaim), each a
// limited claim (claim-parts.sql.ts) run inside beginWithQueueLock's transaction (claim.sql.ts).
import { KEY_CURSOR, keyNotBlocked, limitedClaim, orderedDue, queueStopped, type ClaimOrder } from './claim-parts.sql.js';

/**
 * Whether any key of the queue may be blocked by a partner's 429 now (RateLimitedError with a key): the queue's
 * key_blocked_until, the latest block any of its keys was given (queue-limits.sql.ts), one probe per claim.
 */
const ANY_KEY_BLOCKED = `EXISTS (SELECT 1 FROM background_queues AS kq WHERE kq.queue_name = $1 AND kq.key_blocked_until > now())`;

/**
 * The keys with queued jobs in turn order from a claimer's cursor ($9), each with its earliest queued job's run_at
 * (`first`), as CTEs (after, upto, turn) that follow another CTE: see claimKeyedJobs.
 */
const KEY_TURN = `    ), after AS (
      -- The keys with queued jobs after the cursor ($9: the last key this worker claimed from, '' at first),
      -- then from the first key up to the cursor: a loose scan of the keyed claim index, one probe per key,
      -- read only as far as the candidates below need (the LIMIT stops it). The index is ordered by key, then run_at:
      -- the entry a probe lands on is the key's earliest queued job, so the same probe says whether the key has a due
      -- job (first <= now()), which a claim would otherwise probe again per key.
      (SELECT concurrency_key AS k, run_at AS first FROM background_jobs
       WHERE queue_name = $1 AND status = 'queued' AND concurrency_key IS NOT NULL AND concurrency_key > $9 ORDER BY concurrency_key, run_at LIMIT 1)
      UNION ALL
      SELECT n.k, n.first FROM after AS a CROSS JOIN LATERAL (
        SELECT b.concurrency_key AS k, b.run_at AS first FROM background_jobs AS b
        WHERE b.queue_name = $1 AND b.status = 'queued' AND b.concurrency_key IS NOT NULL AND b.concurrency_key > a.k
        ORDER BY b.concurrency_key, b.run_at LIMIT 1) AS n
    ), upto AS (
      (SELECT concurrency_key AS k, run_at AS first FROM background_jobs
       WHERE queue_name = $1 AND status = 'queued' AND concurrency_key IS NOT NULL AND concurrency_key <= $9 ORDER BY concurrency_key, run_at LIMIT 1)
      UNION ALL
      SELECT n.k, n.first FROM upto AS u CROSS JOIN LATERAL (
        SELECT b.concurrency_key AS k, b.run_at AS first FROM background_jobs AS b
        WHERE b.queue_name = $1 AND b.status = 'queued' AND b.concurrency_key IS NOT NULL AND b.concurrency_key > u.k AND b.concurrency_key <= $9
        ORDER BY b.concurrency_key, b.run_at LIMIT 1) AS n
    ), turn AS (
      SELECT k, first FROM after
      UNION ALL
      SELECT k, first FROM upto
    ), key_priorities AS (
      -- Whether the queue has queued keyed jobs of another priority than 0 (one probe of background_jobs_key_priority_idx,
      -- which holds those jobs only): each key's walks of them (keyDue) run only then. In the index's order, so that the
      -- planner probes it: as an EXISTS it chose a sequential scan where such jobs are many (one is soon found, it
      -- reckons), which reads the whole table when they are not where it starts.
      SELECT coalesce((SELECT true FROM background_jobs WHERE queue_name = $1 AND status = 'queued' AND concurrency_key IS NOT NULL AND priority <> 0
                       ORDER BY concurrency_key LIMIT 1), false) AS found
`;

/**
 * The ORDER BY of a key's jobs of one side of priority 0 (keyDue): highest priority first, then the claim's order
 * within each priority. FIFO follows background_jobs_key_priority_idx; LIFO and mixed sort that key's jobs of another
 * priority than 0 that are due (a few, in queues that use priorities on keyed jobs at all).
 */
const PRIORITY_ORDER: Record<ClaimOrder, string> = {
  fifo: 'j.priority DESC, j.run_at, j.id',
  lifo: 'j.priority DESC, j.run_at DESC, j.id DESC',
  mixed: 'j.priority DESC, j.lifo IS TRUE DESC, CASE WHEN j.lifo THEN j.run_at END DESC, CASE WHEN j.lifo THEN j.id END DESC, j.run_at, j.id',
};

/**
 * A key's due jobs (`where`, on alias j) in the claim's order within the key: highest priority first, then `order`
 * within each priority (README, Limits: "within a key, priority, then run_at"). Three walks appended (a subquery's
 * rows come out in the order its Append makes them), each bounded by `limit` and locked as it is read unless `lock`
 * is false: the key's jobs above priority 0 and those below it through background_jobs_key_priority_idx (only while
 * the queue has such jobs: key_priorities, one probe per claim, a one-time filter), and those of priority 0 (every
 * keyed job in a queue that does not use priorities) through the keyed claim index, in `order` (orderedDue).
 */
function keyDue(select: string, where: string, limit: string, order: ClaimOrder, lock: boolean, indent: string): string {
  const locking = lock ? `\n${indent}  FOR UPDATE SKIP LOCKED` : '';
  const side = (sign: '>' | '<') => `SELECT ${select} FROM background_jobs AS j
${indent}  WHERE ${where} AND j.priority ${sign} 0 AND (SELECT found FROM key_priorities)
${indent}  ORDER BY ${PRIORITY_ORDER[order]}
${indent}  LIMIT ${limit}${locking}`;
  return `SELECT * FROM (
${indent}  ${side('>')}
${indent}) AS higher
${indent}UNION ALL
${indent}SELECT * FROM (
${indent}  ${orderedDue(select, `${where} AND j.priority = 0`, limit, order, lock, `${indent}  `)}
${indent}) AS plain
${indent}UNION ALL
${indent}SELECT * FROM (
${indent}  ${side('<')}
${indent}) AS lower
${indent}LIMIT ${limit}`;
}

/**
 * The first 200 due entries of the queue's claim index, with their keys, for a keyed or fair claim to find its jobs
 * without a key among them: a heap fetch per entry (`concurrency_key` is not in that index), so read only while
 * `look` (a boolean parameter: a one-time filter, no read at all when false). The worker looks on every claim while
 * the last look found some, else once per KEYLESS_LOOK_MS (claim-loop.ts): a queue whose jobs all have keys (a
 * tenant's backlog) does not pay 200 heap fetches a claim to find none.
 */
function keylessDue(look: string): string {
  return `SELECT j.id, j.concurrency_key, j.priority, j.run_at FROM background_jobs AS j
      WHERE ${look}::boolean AND j.queue_name = $1 AND j.status = 'queued' AND j.run_at <= now()
      ORDER BY j.priority DESC, j.run_at, j.id
      LIMIT 200`;
}

/** Whether a keyed or fair claim's look found due jobs without a key (the claim's `keyless_seen`; NULL: it did not look). */
const keylessSeen = (look: string, found: string) => `CASE WHEN ${look}::boolean THEN EXISTS (${found}) END`;

/** The due keyless jobs of a keyed (or fair) claim, as CTEs that follow another: see claimKeyedJobs. */
const KEYLESS = `    ), keyless_due AS (
      -- Jobs without a key (enqueued by an instance that did not know the queue's options) are not limited per
      -- key: taken from the first due entries of the plain claim index (a bounded read: a large keyed backlog
      -- ahead of them delays them until it shrinks), when the worker looks for them ($10: KEYLESS_LOOK_MS).
      ${keylessDue('$10')}
    ), keyless AS (
      -- Read without a lock (that would lock the keyed rows read too), then the keyless ones locked with SKIP LOCKED:
      -- a keyless row another transaction holds is passed over, not waited for while this claim holds the queue's
      -- lock (every claimer of the queue would stall).
      SELECT k.id FROM background_jobs AS k
      WHERE k.id = ANY(ARRAY(SELECT f.id FROM keyless_due AS f WHERE f.concurrency_key IS NULL))
      FOR UPDATE OF k SKIP LOCKED
`;

/**
 * What a key of a fair claim's window offers: its due jobs in the claim's order, numbered (rn: the i-th job of a key
 * of weight w stands at pass + i / w), as many as its room and the bound allow.
 */
function fairOffer(order: ClaimOrder): string {
  const limit = `CASE WHEN w.pass + 1::float8 / w.weight = (SELECT u FROM fair_bound) AND w.pos > (SELECT p FROM fair_bound) THEN 0
          ELSE least(w.room, greatest(0, coalesce(floor(((SELECT u FROM fair_bound) - w.pass) * w.weight + 1e-9)::int, 2147483647))) END`;
  const due = `j.queue_name = $1 AND j.status = 'queued' AND j.concurrency_key = w.k AND j.run_at <= now()`;
  // The key's walks appended (keyDue), then numbered in the order they come out.
  return `
        SELECT o.id, row_number() OVER () AS rn FROM (
          ${keyDue('id', due, limit, order, false, '          ')}
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
    ), fair_stored AS (
      -- Whether the queue has stored weights or a key blocked by a partner's 429 at all: one probe each per claim, so
      -- that the window's keys probe those tables only when there is something to find (two probes a key, of six before).
      SELECT EXISTS (SELECT 1 FROM background_queue_weights AS w WHERE w.queue_name = $1) AS weights,
        ${ANY_KEY_BLOCKED} AS blocks
    ), fair_window AS (
      SELECT f.k, f.weight, row_number() OVER () AS pos,
        greatest(coalesce((SELECT p.pass FROM background_fair_passes AS p WHERE p.queue_name = $1 AND p.key = f.k), c.v - 1), c.v - 1) AS pass,
        least((SELECT n FROM allowance), greatest(0, coalesce($8::int, 2147483647) - f.running)) AS room
      FROM (
        -- Keys in turn with a due job (the first of the key's queued jobs by run_at: KEY_TURN's probe) and a free per-key
        -- slot: a key whose jobs are all scheduled later, or at its cap, is passed over, not given a place.
        SELECT t.k, r.n AS running,
          coalesce(CASE WHEN (SELECT weights FROM fair_stored) THEN (SELECT w.weight FROM background_queue_weights AS w WHERE w.queue_name = $1 AND w.key = t.k) END,
                   ($10::jsonb ->> t.k)::int, $11::int) AS weight
        FROM turn AS t
        -- A key's running jobs, counted only with a per-key cap ($8): without one the count is a one-time-filtered 0.
        CROSS JOIN LATERAL (SELECT count(*)::int AS n FROM background_jobs AS r
                            WHERE $8::int IS NOT NULL AND r.queue_name = $1 AND r.status = 'processing' AND r.limited AND r.concurrency_key = t.k) AS r
        WHERE t.first <= now() AND r.n < coalesce($8::int, 2147483647)
          -- A key blocked by a partner's 429 (background_queue_key_blocks) is passed over too.
          AND CASE WHEN (SELECT blocks FROM fair_stored)
                THEN ${keyNotBlocked('t.k')}
                ELSE true END
        LIMIT greatest((SELECT n FROM allowance), ${FAIR_WINDOW_KEYS})
      ) AS f, fair_clock AS c
    ), fair_bound AS (
      -- Every window key has a due job: with at least the allowance's worth of keys, the jobs taken all stand at or
      -- below the allowance-th lowest first job, so no key need offer jobs past it (a claim of 50 over 50 keys read
      -- 2,500 rows to take 50 without this bound).
      -- On a tie at that job (keys at one pass: every key of a busy queue of equal weights), the claim's order breaks
      -- it by window position, so a key whose first job ties but comes later (p: the position of the allowance-th)
      -- offers nothing either, and its offer's scan is not run (a claim of 10 over 16 tied keys probed all 16).
      -- v is computed as the offers compute their first job's place (pass + 1 / weight, in float8), so the tie is exact.
      SELECT CASE WHEN count(*) >= (SELECT n FROM allowance) THEN max(v) END AS u,
        CASE WHEN count(*) >= (SELECT n FROM allowance) THEN (array_agg(pos ORDER BY v DESC, pos DESC))[1] END AS p
      FROM (SELECT pass + 1::float8 / weight AS v, pos FROM fair_window ORDER BY 1, 2 LIMIT (SELECT n FROM allowance)) AS x
    ), offered AS (
      SELECT c.id, w.k, w.pos, w.pass + c.rn::float8 / w.weight AS vt FROM fair_window AS w CROSS JOIN LATERAL (${fairOffer(order)}
      ) AS c
      UNION ALL
      -- Jobs without a key: one more key (''), when the worker looks for them ($12, as $10 in the keyed claim's KEYLESS).
      SELECT f.id, '', 0, kp.pass + (row_number() OVER (ORDER BY f.priority DESC, f.run_at, f.id))::float8 / $11::int
      FROM (
        ${keylessDue('$12')}
      ) AS f, (
        SELECT greatest(coalesce((SELECT p.pass FROM background_fair_passes AS p WHERE p.queue_name = $1 AND p.key = ''), c.v - 1), c.v - 1) AS pass
        FROM fair_clock AS c
      ) AS kp
      WHERE f.concurrency_key IS NULL
    ), candidates AS (
      SELECT k.id FROM background_jobs AS k
      -- The chosen ids as an array: a probe of the primary key each. As an IN (subquery), PostgreSQL 18 hashed them and
      -- read the whole table in a sequential scan to join them when one key held the queue's 20,000 jobs (8 ms a claim).
      WHERE k.id = ANY(ARRAY(SELECT id FROM offered ORDER BY vt, pos LIMIT (SELECT n FROM allowance))) AND k.status = 'queued'
        AND NOT ${queueStopped(true, '$15')}
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
export function keyedClaim(order: ClaimOrder): string {
  // The per-key probe of the blocks only while the queue has a blocked key at all (one probe per claim, an InitPlan).
  // A key whose earliest job is not due yet (KEY_TURN's `first`) gives none: passed over without a probe of its own.
  const unblocked = `SELECT k FROM turn WHERE turn.first <= now() AND CASE WHEN ${ANY_KEY_BLOCKED} THEN ${keyNotBlocked('turn.k')}
        ELSE true END`;
  const due = `j.queue_name = $1 AND j.status = 'queued' AND j.concurrency_key = t.k AND j.run_at <= now()`;
  // The key's room is computed once, beside the key (its walks use it four times: keyDue). OFFSET 0 keeps the subquery
  // from being pulled up into the join, which put the count back in each of the four places (a claim of 50 read 17 %
  // more pages).
  const keyed = `SELECT c.id FROM (SELECT t.k, ${KEY_ROOM} AS room FROM (${unblocked}) AS t OFFSET 0) AS t CROSS JOIN LATERAL (
        ${keyDue('id', due, 't.room', order, true, '        ')}
      ) AS c`;
  // (Each key gives its highest priority first, then its oldest due jobs, or its newest with LIFO: ClaimOrder.)
  return limitedClaim(`
${KEY_TURN}    ), keyed AS (
      -- Each key in turn gives its due jobs, highest priority first, then oldest first, as many as it has free slots
      -- ($8 less its running jobs).
      -- A key blocked by a partner's 429 (background_queue_key_blocks) gives none: one probe per key, not per row.
      ${keyed}
      LIMIT (SELECT n FROM allowance)
${KEYLESS}    ), candidates AS (
      SELECT id FROM (SELECT id FROM keyed UNION ALL SELECT id FROM keyless) AS c
      WHERE NOT ${queueStopped(true, '$11')}
      LIMIT (SELECT n FROM allowance)
`, 'true', ` OR (o.claimed < o.allowed AND EXISTS (\n        SELECT 1 FROM background_jobs AS r WHERE r.queue_name = $1 AND r.status = 'processing' AND r.limited AND r.concurrency_key IS NOT NULL))`, KEY_CURSOR, '', keylessSeen('$10', 'SELECT 1 FROM keyless_due WHERE concurrency_key IS NULL'));
}

/**
 * A fair claim starts its first $13 jobs (the worker's free slots) and reads the rest ahead, leased for $14 ms (the
 * worker's buffer lease), in the order of the passes they stand at: the worker sends a larger $2 than its free slots only
 * for a queue without caps or a rate limit (a job held ahead counts nowhere but in the shares, which it has used).
 */
const FAIR_READ_AHEAD = { startNow: '$13', bufferLeaseMs: '$14', order: 'o.vt, o.pos', join: 'JOIN offered AS o ON o.id = c.id' };

/** The claim of a queue with fairness (see claimFairJobs in CLAIM_SQL), each key offering its due jobs in `order`. */
export function fairClaim(order: ClaimOrder): string {
  return limitedClaim(`
${fairCandidates(order)}`, 'true', ` OR (o.claimed < o.allowed AND $8::int IS NOT NULL AND EXISTS (\n        SELECT 1 FROM background_jobs AS r WHERE r.queue_name = $1 AND r.status = 'processing' AND r.limited AND r.concurrency_key IS NOT NULL))`, KEY_CURSOR, FAIR_PASSES, keylessSeen('$12', "SELECT 1 FROM offered WHERE k = ''"), FAIR_READ_AHEAD);
}
