import type { EnqueueOutcome, NewJobRow } from './job-store.types.js';

/** What one enqueue of a job with a unique key came to. */
export interface KeyedOutcome {
  id: string;
  outcome: EnqueueOutcome;
}

/**
 * Rows of one enqueueMany call folded to one row per key, as if the calls had run one after the other: a
 * statement's ON CONFLICT cannot touch one row twice, and two rows of one key must not both insert. The first
 * row of a key is its representative; a later 'replace' row brings its payload and run_at, a later
 * 'keep-run-at' row its payload, a later 'keep' row nothing. Rows without a key stay as they are.
 */
export function foldKeyedRows(rows: NewJobRow[]): { folded: NewJobRow[]; slotOf: number[] } {
  const folded: NewJobRow[] = [];
  const slotOf: number[] = [];
  const slotByKey = new Map<string, number>();
  for (const row of rows) {
    if (row.uniqueKey == null) {
      slotOf.push(folded.push(row) - 1);
      continue;
    }
    // A window key (uniqueForMs) and a live key are held in different places, so they are different keys.
    const key = `${row.uniqueForMs == null ? 'live' : 'window'}\u0000${row.queue}\u0000${row.uniqueKey}`;
    const slot = slotByKey.get(key);
    if (slot === undefined) {
      slotByKey.set(key, folded.length);
      slotOf.push(folded.push({ ...row }) - 1);
      continue;
    }
    slotOf.push(slot);
    const rep = folded[slot];
    if (row.onConflict === 'replace') {
      Object.assign(rep, { payloadJson: row.payloadJson, runAt: row.runAt, delayMs: row.delayMs, onConflict: 'replace' });
    } else if (row.onConflict === 'keep-run-at') {
      rep.payloadJson = row.payloadJson;
      if (rep.onConflict === 'keep') rep.onConflict = 'keep-run-at';
    }
  }
  return { folded, slotOf };
}

/** Each input row's outcome: the representative's, and for a later row of the same key a duplicate of it. */
export function unfoldOutcomes(rows: NewJobRow[], slotOf: number[], outcomes: KeyedOutcome[]): KeyedOutcome[] {
  const seen = new Set<number>();
  return rows.map((row, i) => {
    const slot = slotOf[i];
    const result = outcomes[slot];
    if (!seen.has(slot)) {
      seen.add(slot);
      // A 'keep' row replaced nothing itself: a later row of its key did.
      return result.outcome === 'replaced' && row.onConflict === 'keep' ? { id: result.id, outcome: 'duplicate' } : result;
    }
    // A later row of a key: the job already exists by its turn; it changed it if the job was still queued.
    const changed = result.outcome !== 'duplicate' && row.onConflict !== 'keep' && row.uniqueForMs == null;
    return { id: result.id, outcome: changed ? 'replaced' : 'duplicate' };
  });
}
