// Claim: JobStore's claims (plain, and of a limited queue inside the queue's lock) and the claimed rows as the worker takes them.
import { setTimeout as sleep } from 'node:timers/promises';
import type { QueryResult } from 'pg';
import { beginWithQueueTryLock, LIMIT_LOCK_IDLE_MS, type ClaimOrder } from './claim.sql.js';
import { inTransaction } from './in-transaction.js';
import { explainPoolerError, type JobStatements } from './job-statements.js';
import type { ClaimedJob, ClaimLimits, ClaimResult } from './job-store.types.js';

/**
 * Claims up to `limit` due jobs: the first `readAhead.startNow` (all, without it) start at once, leased for
 * leaseMs, and up to `armAhead` more are started for the worker to hold ahead of a free slot (not past a job on its
 * last attempt); the rest are read ahead (buffered, leased for bufferLeaseMs). `observed`: also return each job's claim latency and trace context
 * (claimJobsObserved), for listeners and tracing. `keyBlocks`: a key of the queue is blocked by a partner's 429: the
 * variant that passes over that key's jobs (claimJobsKeyBlocked). `order`: the queue's LIFO, if any (ClaimOrder in
 * claim.sql.ts): 'fifo' sends the statements a queue without LIFO always had. `storedLimits`: the worker's copy of the
 * limits stored for the queue (JSON; null: none), which the queue's row must still hold, else the claim takes nothing
 * (queueStopped in claim-parts.sql.ts).
 */
export async function claimJobs(
  db: JobStatements,
  queue: string,
  limit: number,
  workerId: string,
  leaseMs: number,
  observed = false,
  readAhead?: { startNow: number; armAhead?: number; bufferLeaseMs: number },
  keyBlocks = false,
  order: ClaimOrder = 'fifo',
  storedLimits: string | null = null,
): Promise<ClaimResult> {
  const values = [queue, limit, workerId, leaseMs, Math.min(readAhead?.startNow ?? limit, limit), readAhead?.bufferLeaseMs ?? leaseMs, readAhead?.armAhead ?? 0, storedLimits];
  const name = keyBlocks ? (observed ? 'claimJobsObservedKeyBlocked' : 'claimJobsKeyBlocked') : observed ? 'claimJobsObserved' : 'claimJobs';
  return toClaimResult(await db.run<ClaimRow>(inOrder(name, order), values));
}

/** A claim statement's name in `order` (claimJobs, claimJobsLifo, claimJobsMixed). */
function inOrder<N extends string>(name: N, order: ClaimOrder): N | `${N}Lifo` | `${N}Mixed` {
  return order === 'fifo' ? name : order === 'lifo' ? `${name}Lifo` : `${name}Mixed`;
}

/**
 * The claim of a queue with limits: the queue's advisory lock, then the claim, in one transaction of three
 * round trips: BEGIN and the lock (one message), the claim, COMMIT. The lock must come before the claim's
 * snapshot, so it cannot share the claim's statement; it is held for the last two round trips. `lookKeyless`: a keyed
 * or fair claim reads the queue's first due jobs for some without a key (their answer: keylessSeen). `readAhead`: a fair
 * claim starts its first `startNow` jobs and holds the rest in the worker's buffer (claimFairJobs' $13 and $14).
 */
export async function claimLimitedJobs(
  db: JobStatements,
  queue: string,
  limit: number,
  workerId: string,
  leaseMs: number,
  limits: ClaimLimits,
  keyCursor = '',
  keyBlocks = false,
  order: ClaimOrder = 'fifo',
  lookKeyless = true,
  readAhead?: { startNow: number; bufferLeaseMs: number },
  storedLimits: string | null = null,
): Promise<ClaimResult> {
  const values: unknown[] = [queue, limit, workerId, leaseMs, limits.globalConcurrency ?? null, limits.rateLimit?.max ?? null, limits.rateLimit?.intervalMs ?? 0];
  const fair = limits.fairness !== undefined;
  const keyed = fair || limits.concurrencyPerKey !== undefined;
  if (keyed) values.push(limits.concurrencyPerKey ?? null, keyCursor);
  if (fair) values.push(JSON.stringify(limits.fairness!.weights), limits.fairness!.defaultWeight);
  if (keyed) values.push(lookKeyless); // $10 of the keyed claim, $12 of the fair one
  // The fair claim's read-ahead ($13 jobs start now, the rest held for $14 ms): none unless asked.
  if (fair) values.push(Math.min(readAhead?.startNow ?? limit, limit), readAhead?.bufferLeaseMs ?? leaseMs);
  // The worker's copy of the queue's stored limits, which the row must still hold (queueStopped): $8, $11 or $15.
  values.push(storedLimits);
  const statement = inOrder(fair ? 'claimFairJobs' : keyed ? 'claimKeyedJobs' : keyBlocks ? 'claimLimitedJobsKeyBlocked' : 'claimLimitedJobs', order);
  let rows: ClaimRow[] | undefined;
  const begin = beginWithQueueTryLock(queueLockKey(queue));
  const giveUpAt = performance.now() + LIMIT_LOCK_IDLE_MS + 1_000;
  // The lock is tried, not waited for (beginWithQueueTryLock): no connection is held while another claimer has it. Its
  // holders keep it for two round trips, so a miss tries again soon, a little later each time, with jitter.
  for (let pauseMs = 2; ; pauseMs = Math.min(LOCK_RETRY_MAX_MS, pauseMs * 2)) {
    try {
      rows = await inTransaction(
        db.pool,
        async (client, opened) => (lockTaken(opened) ? (await client.query<ClaimRow>(db.statement(statement, values))).rows : undefined),
        begin,
      );
    } catch (error) {
      throw explainPoolerError(error);
    }
    if (rows) break;
    // Held all along (a holder frozen until PostgreSQL ends its session): an empty answer that says "look again soon".
    if (performance.now() >= giveUpAt) return { jobs: [], nextDueMs: null, atCapacity: true, lockBusy: true, ...(keyed ? { keyCursor } : {}) };
    await sleep(pauseMs * (0.5 + Math.random()));
  }
  const result = toClaimResult(rows);
  for (const r of rows) {
    if (keyed) result.keyCursor = r.key_cursor ?? keyCursor;
    if (r.keyless_seen != null) result.keylessSeen = r.keyless_seen;
    if (r.id !== null) continue;
    result.rateWaitMs = r.rate_wait_ms ?? null;
    result.atCapacity = r.at_capacity === true;
  }
  return result;
}

export interface ClaimRow {
  id: string | null;
  payload: unknown;
  attempts: number;
  fence_token: string;
  max_attempts: number;
  priority: number;
  run_at_ms: number;
  created_at_ms: number | null;
  wait_ms?: number;
  trace_context?: unknown;
  buffered?: boolean;
  /** The plain claim's and the eager insert's: the row has no unique key (absent: it may have one). */
  keyless?: boolean;
  next_due_ms: number | null;
  rate_wait_ms?: number | null;
  at_capacity?: boolean | null;
  key_cursor?: string | null;
  keyless_seen?: boolean | null;
}

/** The longest pause between two tries of a limited queue's lock. */
const LOCK_RETRY_MAX_MS = 50;

/** Whether the try of the queue's lock (the last statement of beginWithQueueTryLock) took it. */
function lockTaken(opened: QueryResult | QueryResult[]): boolean {
  const last = Array.isArray(opened) ? opened[opened.length - 1] : opened;
  return (last.rows[0] as { locked?: boolean } | undefined)?.locked === true;
}

/** The second key of a limited queue's advisory lock: FNV-1a of its name, as an int4 (a collision only makes two queues take turns). */
export function queueLockKey(queue: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < queue.length; i++) hash = Math.imul(hash ^ queue.charCodeAt(i), 0x01000193);
  return hash | 0;
}

/** The claimed jobs, and the extra row (id NULL) of a short claim as nextDueMs. */
function toClaimResult(rows: ClaimRow[]): ClaimResult {
  const jobs: ClaimedJob[] = [];
  let nextDueMs: number | null = null;
  for (const r of rows) {
    if (r.id === null) {
      nextDueMs = r.next_due_ms;
      continue;
    }
    jobs.push(toClaimedJob(r as ClaimRow & { id: string }));
  }
  return { jobs, nextDueMs };
}

/** A claimed row as the worker takes it (a claim's, or an eager start's insert). */
export function toClaimedJob(r: ClaimRow & { id: string }): ClaimedJob {
  return {
    id: r.id,
    payload: r.payload,
    attempt: r.attempts,
    token: r.fence_token,
    maxAttempts: r.max_attempts,
    priority: r.priority,
    runAtMs: r.run_at_ms,
    createdAtMs: r.created_at_ms ?? r.run_at_ms, // NULL when equal (CREATED_AT_MS in claim.sql.ts)
    waitMs: r.wait_ms,
    traceContext: r.trace_context,
    buffered: r.buffered === true,
    keyless: r.keyless === true,
  };
}
