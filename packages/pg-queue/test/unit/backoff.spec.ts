import { describe, expect, it } from '@jest/globals';
import { exponentialBackoff } from '../../src/utils/backoff.js';
import { resolveHandlerOptions } from '../../src/utils/resolve-options.js';

describe('exponentialBackoff', () => {
  it('follows the seed schedule, 10 s x 2^attempt, without jitter', () => {
    const backoff = exponentialBackoff({ jitter: false });
    expect([1, 2, 3, 4].map((a) => backoff(a, new Error()))).toEqual([20_000, 40_000, 80_000, 160_000]);
  });
  it('keeps jitter within +/-25% and under the cap', () => {
    const backoff = exponentialBackoff({ baseMs: 1_000, maxMs: 5_000 });
    for (let i = 0; i < 200; i++) {
      const d = backoff(1, null);
      expect(d).toBeGreaterThanOrEqual(1_500);
      expect(d).toBeLessThanOrEqual(2_500);
      expect(backoff(30, null)).toBeLessThanOrEqual(5_000);
    }
  });
  it('is the default of a handler, and a function replaces it', () => {
    expect(resolveHandlerOptions('q').backoff(1, null)).toBeGreaterThanOrEqual(15_000);
    expect(resolveHandlerOptions('q', { backoff: (attempt) => attempt * 7 }).backoff(3, null)).toBe(21);
  });
});
