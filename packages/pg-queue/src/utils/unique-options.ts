import { PgQueueError } from '../errors/pg-queue.error.js';
import { INVALID_OPTION } from '../pg-queue.messages.js';
import { hasLoneSurrogate } from './serialize-payload.js';
import type { OnConflict } from '../store/job-store.types.js';

/** Longest unique key, in characters: an index entry must stay well inside a btree page (about 2,700 bytes). */
export const MAX_UNIQUE_KEY_LENGTH = 255;
/** Longest uniqueForMs window: ten years. */
export const MAX_UNIQUE_FOR_MS = 10 * 365 * 86_400_000;

const MODES: readonly OnConflict[] = ['keep', 'replace', 'keep-run-at', 'queue-after'];

export interface UniqueOptions {
  /**
   * At most one job of this queue holds this key: a queued or running one (a completed, failed or cancelled
   * job frees it), or with `uniqueForMs` the first job enqueued in the window. Another enqueue of the key is
   * a duplicate: it adds no job and gets the holder's id.
   */
  uniqueKey?: string;
  /**
   * What a duplicate does to the holder while it is still queued: 'keep' (default) leaves it; 'replace'
   * gives it this call's payload and run_at (debounce); 'keep-run-at' gives it this call's payload and keeps
   * its run_at (throttle). A running holder is never changed: the call is then a plain duplicate, except with
   * 'queue-after' (BullMQ's keepLastIfActive): as 'replace' while the holder is queued, and while it runs one
   * successor waits with the latest payload (later duplicates replace the successor's payload) and starts once the
   * running job ends (completed, failed for good or cancelled). README, "Unique jobs".
   */
  onConflict?: OnConflict;
  /**
   * Hold the key for this long from the enqueue that added the job, whatever becomes of the job (completed,
   * failed, pruned): one job per key per window. onConflict must then be 'keep'.
   */
  uniqueForMs?: number;
}

/** The unique-job fields of a row, validated; throws a PgQueueError naming the bad option. */
export function uniqueFields(where: string, { uniqueKey, onConflict, uniqueForMs }: UniqueOptions): Pick<UniqueOptions, 'uniqueKey' | 'onConflict' | 'uniqueForMs'> {
  if (uniqueKey === undefined) {
    if (onConflict !== undefined) throw new PgQueueError(INVALID_OPTION(where, 'onConflict', onConflict, 'no onConflict without a uniqueKey'));
    if (uniqueForMs !== undefined) throw new PgQueueError(INVALID_OPTION(where, 'uniqueForMs', uniqueForMs, 'no uniqueForMs without a uniqueKey'));
    return {};
  }
  // A lone surrogate is refused as in payloads: node-postgres sends it as U+FFFD, so keys that differ only there became one.
  if (typeof uniqueKey !== 'string' || uniqueKey.length === 0 || uniqueKey.length > MAX_UNIQUE_KEY_LENGTH || uniqueKey.includes('\u0000') || hasLoneSurrogate(uniqueKey)) {
    throw new PgQueueError(INVALID_OPTION(where, 'uniqueKey', uniqueKey, `a string of 1 to ${MAX_UNIQUE_KEY_LENGTH} characters, without NUL or a lone UTF-16 surrogate`));
  }
  if (onConflict !== undefined && !MODES.includes(onConflict)) {
    throw new PgQueueError(INVALID_OPTION(where, 'onConflict', onConflict, `one of ${MODES.map((m) => `'${m}'`).join(', ')}`));
  }
  if (uniqueForMs !== undefined) {
    if (!Number.isInteger(uniqueForMs) || uniqueForMs < 1 || uniqueForMs > MAX_UNIQUE_FOR_MS) {
      throw new PgQueueError(INVALID_OPTION(where, 'uniqueForMs', uniqueForMs, `an integer from 1 to ${MAX_UNIQUE_FOR_MS} (ms)`));
    }
    if ((onConflict ?? 'keep') !== 'keep') {
      throw new PgQueueError(INVALID_OPTION(where, 'onConflict', onConflict, "'keep' with uniqueForMs (a window's job is not replaced)"));
    }
  }
  return { uniqueKey, onConflict: onConflict ?? 'keep', uniqueForMs };
}
