// Limits changed at runtime (issue 42, part 2): what QueueService.setQueueLimits accepts, checked before anything is
// stored, and the limits in force: the queue's stored overrides over its decorator's values. Pure, no I/O.
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { RateLimit, ResolvedHandlerOptions } from '../interfaces/job-handler-options.interface.js';
import type { StoredLimits } from '../store/queue-limits.store.js';

/**
 * A change of a queue's limits (QueueService.setQueueLimits): a key left out keeps what is stored; `null` clears the
 * override (the decorator's value applies again); `'none'` removes a limit across instances for this queue whatever
 * the decorator says.
 */
export interface QueueLimitsChange {
  /** Jobs of the queue running at once in each process, 1 to 10000. */
  concurrency?: number | null;
  /** Jobs of the queue running at once in all processes together, 1 to 1000000. */
  globalConcurrency?: number | 'none' | null;
  /** Starts per sliding window of intervalMs in all processes together. */
  rateLimit?: RateLimit | 'none' | null;
  /** Jobs of one concurrency key running at once in all processes together, 1 to 1000000. */
  concurrencyPerKey?: number | 'none' | null;
}

/** Where a limit in force comes from: the operator's override in the database, or the handler's decorator. */
export type LimitSource = 'database' | 'decorator';

/** One limit in force: its value (`'none'`: no such limit; undefined: the decorator's, unknown in this process) and where it comes from. */
export interface LimitInForce<T> {
  value: T | 'none' | undefined;
  source: LimitSource;
}

/** A queue's limits in force (QueueService.getQueueLimits), and its blocks by a partner's 429 (RateLimitedError). */
export interface QueueLimits {
  queue: string;
  concurrency: LimitInForce<number>;
  globalConcurrency: LimitInForce<number>;
  rateLimit: LimitInForce<RateLimit>;
  concurrencyPerKey: LimitInForce<number>;
  /** ms left of the queue's block (0: not blocked). */
  blockedForMs: number;
  /** ms left of the latest block of one of its concurrency keys (0: none). */
  keysBlockedForMs: number;
}

/** The limits a worker applies: its decorator's values with the stored overrides over them. */
export interface EffectiveLimits {
  concurrency: number;
  globalConcurrency: number | undefined;
  rateLimit: RateLimit | undefined;
  concurrencyPerKey: number | undefined;
}

const KEYS = ['concurrency', 'globalConcurrency', 'rateLimit', 'concurrencyPerKey'] as const;

/**
 * Checks a change and splits it into what to store (`set`: a value, or null for "none") and which overrides to clear;
 * a problem throws a PgQueueError naming the queue, the limit and what was given, and nothing is stored.
 */
export function checkLimitsChange(queue: string, change: unknown): { set: StoredLimits; clear: string[] } {
  const where = `setQueueLimits('${queue}')`;
  if (change === null || typeof change !== 'object' || Array.isArray(change)) throw new PgQueueError(`${where}: expected an object of limits, got ${describe(change)}.`);
  const stray = Object.keys(change).filter((k) => !(KEYS as readonly string[]).includes(k));
  if (stray.length > 0) throw new PgQueueError(`${where}: unknown limit ${stray.map((k) => JSON.stringify(k)).join(', ')}; known limits: ${KEYS.join(', ')}.`);
  const given = change as Record<string, unknown>;
  if (!KEYS.some((k) => given[k] !== undefined)) throw new PgQueueError(`${where}: no limit to change (give one of ${KEYS.join(', ')}).`);
  const set: Record<string, unknown> = {};
  const clear: string[] = [];
  for (const key of KEYS) {
    const value = given[key];
    if (value === undefined) continue;
    if (value === null) clear.push(key);
    else if (value === 'none') {
      if (key === 'concurrency') throw new PgQueueError(`${where}: concurrency cannot be 'none' (each process runs at most that many jobs); give an integer from 1 to 10000, or null for the decorator's.`);
      set[key] = null;
    } else if (key === 'rateLimit') set[key] = checkRate(where, value);
    else set[key] = checkInt(where, key, value, key === 'concurrency' ? 10_000 : 1_000_000);
  }
  return { set: set as StoredLimits, clear };
}

function checkInt(where: string, key: string, value: unknown, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    const also = key === 'concurrency' ? '' : `, 'none'`;
    throw new PgQueueError(`${where}: ${key} must be an integer from 1 to ${max}${also} or null (the decorator's); got ${describe(value)}.`);
  }
  return value;
}

function checkRate(where: string, value: unknown): RateLimit {
  const expected = `{ max: 1 to 1000000, intervalMs: 1 to 86400000 }, 'none' or null (the decorator's)`;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new PgQueueError(`${where}: rateLimit must be ${expected}; got ${describe(value)}.`);
  const keys = Object.keys(value);
  const { max, intervalMs } = value as Record<string, unknown>;
  const ok = (n: unknown, top: number) => typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= top;
  if (keys.some((k) => k !== 'max' && k !== 'intervalMs') || !ok(max, 1_000_000) || !ok(intervalMs, 86_400_000)) {
    throw new PgQueueError(`${where}: rateLimit must be ${expected}; got ${describe(value)}.`);
  }
  return { max: max as number, intervalMs: intervalMs as number };
}

/** The stored overrides (null: none) over the decorator's `defaults`: what a worker applies. */
export function effectiveLimits(defaults: Pick<ResolvedHandlerOptions, keyof EffectiveLimits>, stored: StoredLimits | null): EffectiveLimits {
  const pick = <K extends keyof EffectiveLimits>(key: K): EffectiveLimits[K] => {
    if (stored === null || !(key in stored)) return defaults[key];
    return ((stored as Record<string, unknown>)[key] ?? undefined) as EffectiveLimits[K];
  };
  return { concurrency: pick('concurrency'), globalConcurrency: pick('globalConcurrency'), rateLimit: pick('rateLimit'), concurrencyPerKey: pick('concurrencyPerKey') };
}

/** Whether two sets of limits are the same (a worker applies a read only when something changed). */
export function sameLimits(a: EffectiveLimits, b: EffectiveLimits): boolean {
  return (
    a.concurrency === b.concurrency &&
    a.globalConcurrency === b.globalConcurrency &&
    a.concurrencyPerKey === b.concurrencyPerKey &&
    a.rateLimit?.max === b.rateLimit?.max &&
    a.rateLimit?.intervalMs === b.rateLimit?.intervalMs
  );
}

/**
 * The limits in force as getQueueLimits reports them: each from the database when an override is stored, else the
 * decorator's (`defaults`; undefined where this process has no handler of the queue: its value is unknown here).
 */
export function limitsInForce(
  queue: string,
  stored: StoredLimits | null,
  defaults: Pick<ResolvedHandlerOptions, keyof EffectiveLimits> | undefined,
  blocks: { blockedMs: number; keyBlockedMs: number },
): QueueLimits {
  const one = <K extends keyof EffectiveLimits>(key: K): LimitInForce<NonNullable<EffectiveLimits[K]>> => {
    if (stored !== null && key in stored) return { value: ((stored as Record<string, unknown>)[key] ?? 'none') as NonNullable<EffectiveLimits[K]> | 'none', source: 'database' };
    if (defaults === undefined) return { value: undefined, source: 'decorator' };
    return { value: (defaults[key] ?? 'none') as NonNullable<EffectiveLimits[K]> | 'none', source: 'decorator' };
  };
  return {
    queue,
    concurrency: one('concurrency'),
    globalConcurrency: one('globalConcurrency'),
    rateLimit: one('rateLimit'),
    concurrencyPerKey: one('concurrencyPerKey'),
    blockedForMs: Math.ceil(blocks.blockedMs),
    keysBlockedForMs: Math.ceil(blocks.keyBlockedMs),
  };
}

function describe(value: unknown): string {
  try {
    return typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  } catch {
    return String(value);
  }
}
