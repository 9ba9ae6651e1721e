// Claim: the plain claim (read-ahead included) and the two claims of a limited queue, which run inside
// beginWithQueueLock's transaction.
import { LIMIT_LOCK_SPACE } from '../pg-queue.constants.js';
import { MS } from './shared.sql.js';
import { CREATED_AT_MS, dueCandidates, limitedClaim, type ClaimOrder } from './claim-parts.sql.js';
import { fairClaim, keyedClaim } from './claim-keyed.sql.js';

export { queuedPriorities, queueStopped, type ClaimOrder } from './claim-parts.sql.js';
export { FAIR_WINDOW_KEYS } from './claim-keyed.sql.js';

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
      -- keyless: no unique key, so no successor can wait for it (onConflict 'queue-after'): see completeJobsKeyless.
      RETURNING j.id, j.payload, j.attempts${buffered ? ' + 1' : ''} AS attempts, j.fence_token, j.max_attempts, j.priority, ${buffered} AS buffered,
        date_part('epoch', j.run_at) * 1000 AS run_at_ms, ${CREATED_AT_MS}, j.unique_key IS NULL AS keyless${
          observed ? `,
        date_part('epoch', now() - j.run_at) * 1000 AS wait_ms, j.trace_context` : ''
        }`;
  return `
    WITH RECURSIVE ${dueCandidates('$2', '$8', true, keyBlocks, order)}    ), numbered AS (
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
        ? `(SELECT id, payload, attempts, fence_token, max_attempts, priority, buffered, run_at_ms, created_at_ms, keyless${extras.map((c) => `, ${c}`).join('')}, NULL::float8 AS next_due_ms FROM claimed
     ORDER BY priority DESC, run_at_ms, id)`
        : // LIFO: the walk's own order (a LIFO job of a priority before its FIFO jobs), which no column of the rows says.
          `(SELECT c.id, c.payload, c.attempts, c.fence_token, c.max_attempts, c.priority, c.buffered, c.run_at_ms, c.created_at_ms, c.keyless${extras.map((x) => `, c.${x}`).join('')}, NULL::float8 AS next_due_ms
     FROM claimed AS c JOIN numbered AS n ON n.id = c.id
     ORDER BY n.rn)`
    }
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL${extras.map(() => ', NULL').join('')},
      (SELECT greatest(0, extract(epoch FROM run_at - clock_timestamp()) * 1000)::float8
       FROM background_jobs WHERE queue_name = $1 AND status = 'queued' AND run_at > created_at AND run_at > now()
       ORDER BY run_at LIMIT 1)
    WHERE (SELECT count(*) FROM claimed) < $2`;
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
    ), ${dueCandidates('(SELECT n FROM allowance)', '$8')}`, 'CASE WHEN (SELECT n FROM global_limit) IS NOT NULL THEN true END', '', 'NULL::text'),
  // claimLimitedJobs while a key of the queue is blocked (as claimJobsKeyBlocked).
  claimLimitedJobsKeyBlocked: limitedClaim(`
    ), ${dueCandidates('(SELECT n FROM allowance)', '$8', false, true)}`, 'CASE WHEN (SELECT n FROM global_limit) IS NOT NULL THEN true END', '', 'NULL::text'),

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
    ), ${dueCandidates('(SELECT n FROM allowance)', '$8', false, keyBlocks, order)}`, 'CASE WHEN (SELECT n FROM global_limit) IS NOT NULL THEN true END', '', 'NULL::text');
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
