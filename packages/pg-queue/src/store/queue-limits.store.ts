// Limits changed at runtime and a partner's 429: JobStore's statements on the queue's row (queue-limits.sql.ts).
import type { JobStatements } from './job-statements.js';

/**
 * The overrides stored for a queue (background_queues.limits): a key absent means "the decorator's value", a key
 * set to null means "no such limit" (none for this queue, whatever the decorator says).
 */
export interface StoredLimits {
  concurrency?: number;
  globalConcurrency?: number | null;
  rateLimit?: { max: number; intervalMs: number } | null;
  concurrencyPerKey?: number | null;
}

/** What a process serving a queue reads of its row (queueSettings). */
export interface QueueSettingsRow {
  queue: string;
  limits: StoredLimits | null;
  /** The stored limits as the row's text (null: none): what the worker's claims send back for the row to compare. */
  limitsText: string | null;
  /** ms left of the queue's block by a partner's 429 (0: none). */
  blockedMs: number;
  /** ms left of the latest block of one of its keys (0: none). */
  keyBlockedMs: number;
  /** An adaptive backoff (of the queue or a key) waits for a success to start again from the partner's ms. */
  backoff: boolean;
  /** A job was enqueued to the queue with `lifo: true` (background_queues.lifo_jobs): its claims take LIFO jobs first. */
  lifoJobs: boolean;
}

/** Sets (`set`, null values meaning "none") and clears (`clear`, back to the decorator's) overrides; returns what is stored after. */
export async function setQueueLimits(db: JobStatements, queue: string, set: StoredLimits, clear: string[]): Promise<StoredLimits | null> {
  const [row] = await db.run<{ limits: StoredLimits | null }>('setQueueLimits', [queue, JSON.stringify(set), clear]);
  return row?.limits ?? null;
}

export async function queueSettings(db: JobStatements, queues: string[]): Promise<QueueSettingsRow[]> {
  const rows = await db.run<{ queue_name: string; limits: StoredLimits | null; limits_text: string | null; blocked_ms: number; key_blocked_ms: number; backoff: boolean; lifo_jobs: boolean }>('queueSettings', [queues]);
  return rows.map((r) => ({ queue: r.queue_name, limits: r.limits, limitsText: r.limits_text, blockedMs: r.blocked_ms, keyBlockedMs: r.key_blocked_ms, backoff: r.backoff, lifoJobs: r.lifo_jobs }));
}

/** Blocks the queue (or its `key`) for `ms`, grown by the adaptive backoff up to `maxMs`; returns the block's ms left. */
export async function blockQueue(db: JobStatements, queue: string, ms: number, maxMs: number, key?: string): Promise<number> {
  const [row] = key === undefined
    ? await db.run<{ blocked_ms: number }>('blockQueue', [queue, ms, maxMs])
    : await db.run<{ blocked_ms: number }>('blockKey', [queue, ms, maxMs, key]);
  return row?.blocked_ms ?? 0;
}

/** A success in the queue: its adaptive backoffs start again from the partner's ms. */
export async function resetBackoff(db: JobStatements, queue: string): Promise<void> {
  await db.run('resetBackoff', [queue]);
}

/** The worker's jobs `ids` (running, or held started) count against the limits from now on (a switch to a limited claim). */
export async function markLimited(db: JobStatements, workerId: string, ids: string[]): Promise<void> {
  if (ids.length > 0) await db.run('markLimited', [workerId, ids]);
}
