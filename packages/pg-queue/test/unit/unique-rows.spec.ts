import { describe, expect, it } from '@jest/globals';
import { MAX_RETRY_DELAY_MS } from '../../src/pg-queue.messages.js';
import type { NewJobRow, OnConflict } from '../../src/store/job-store.types.js';
import { foldKeyedRows, unfoldOutcomes } from '../../src/store/unique-rows.js';
import { snoozeDelay } from '../../src/utils/backoff.js';

const row = (payload: number, uniqueKey?: string, onConflict: OnConflict = 'keep', extra: Partial<NewJobRow> = {}): NewJobRow => ({
  queue: 'q',
  payloadJson: String(payload),
  priority: 0,
  maxAttempts: 5,
  runAt: null,
  concurrencyKey: null,
  delayMs: payload * 1_000,
  ...(uniqueKey === undefined ? {} : { uniqueKey, onConflict }),
  ...extra,
});

describe('foldKeyedRows (rows of one key in one enqueueMany call)', () => {
  it('keeps plain rows apart and folds each key into its first row', () => {
    const rows = [row(1, 'a'), row(2), row(3, 'a'), row(4, 'b'), row(5)];
    const { folded, slotOf } = foldKeyedRows(rows);
    expect(folded.map((r) => r.payloadJson)).toEqual(['1', '2', '4', '5']);
    expect(slotOf).toEqual([0, 1, 0, 2, 3]);
  });

  it("applies later rows as if they ran one after the other: 'replace' brings payload and run_at, 'keep-run-at' the payload", () => {
    const { folded } = foldKeyedRows([row(1, 'a'), row(2, 'a', 'keep-run-at'), row(3, 'a', 'keep')]);
    expect(folded).toEqual([expect.objectContaining({ payloadJson: '2', delayMs: 1_000, onConflict: 'keep-run-at' })]);
    const replaced = foldKeyedRows([row(1, 'a'), row(2, 'a', 'replace'), row(3, 'a', 'keep-run-at')]).folded;
    expect(replaced).toEqual([expect.objectContaining({ payloadJson: '3', delayMs: 2_000, onConflict: 'replace' })]);
  });

  it('treats a window key and a live key of the same name, or of two queues, as different keys', () => {
    const { folded } = foldKeyedRows([row(1, 'a'), row(2, 'a', 'keep', { uniqueForMs: 1_000 }), row(3, 'a', 'keep', { queue: 'other' })]);
    expect(folded).toHaveLength(3);
  });

  it('reports later rows of a key as duplicates of the first, replacing when their mode changed a queued job', () => {
    const rows = [row(1, 'a'), row(2, 'a', 'replace'), row(3, 'a')];
    const { slotOf } = foldKeyedRows(rows);
    expect(unfoldOutcomes(rows, slotOf, [{ id: '7', outcome: 'inserted' }])).toEqual([
      { id: '7', outcome: 'inserted' },
      { id: '7', outcome: 'replaced' },
      { id: '7', outcome: 'duplicate' },
    ]);
    // The holder was running: nothing was replaced, by any row.
    expect(unfoldOutcomes(rows, slotOf, [{ id: '7', outcome: 'duplicate' }]).map((r) => r.outcome)).toEqual(['duplicate', 'duplicate', 'duplicate']);
    // A queued holder replaced by the second row: the first ('keep') replaced nothing itself.
    expect(unfoldOutcomes(rows, slotOf, [{ id: '7', outcome: 'replaced' }]).map((r) => r.outcome)).toEqual(['duplicate', 'replaced', 'duplicate']);
  });
});

describe('snoozeDelay', () => {
  it('keeps a whole number of ms in range, clamps the rest', () => {
    expect(snoozeDelay(1_500.4)).toEqual({ delayMs: 1_500, clamped: false });
    expect(snoozeDelay(0)).toEqual({ delayMs: 0, clamped: false });
    expect(snoozeDelay(-1)).toEqual({ delayMs: 0, clamped: true });
    expect(snoozeDelay(Number.NaN)).toEqual({ delayMs: 0, clamped: true });
    expect(snoozeDelay('10')).toEqual({ delayMs: 0, clamped: true });
    expect(snoozeDelay(Number.POSITIVE_INFINITY)).toEqual({ delayMs: MAX_RETRY_DELAY_MS, clamped: true });
    expect(snoozeDelay(1e300)).toEqual({ delayMs: MAX_RETRY_DELAY_MS, clamped: true });
  });
});
