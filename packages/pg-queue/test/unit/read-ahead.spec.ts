import { describe, expect, it } from '@jest/globals';
import { MAX_HOLD_MS, ReadAhead } from '../../src/worker/read-ahead.js';

/** `n` jobs of `ms` each finished. */
function finish(r: ReadAhead, n: number, ms: number): void {
  for (let i = 0; i < n; i++) r.jobFinished(ms);
}

/** Claims until the read-ahead stops growing (each claim returns after `roundTripMs`); returns the sizes seen. */
function claimUntilSteady(r: ReadAhead, roundTripMs: number): number[] {
  const sizes: number[] = [];
  for (let i = 0; i < 20; i++) {
    const size = r.size;
    sizes.push(size);
    r.claimed(roundTripMs, size);
    if (i > 0 && sizes[i] === sizes[i - 1]) break;
  }
  return sizes;
}

describe('ReadAhead (prefetch: auto)', () => {
  it('reads nothing ahead before a job has finished and a claim has returned', () => {
    const r = new ReadAhead(10);
    expect(r.size).toBe(0);
    r.claimed(2, 0);
    expect(r.size).toBe(0); // no duration yet
    const s = new ReadAhead(10);
    finish(s, 10, 0.01);
    expect(s.size).toBe(0); // no round trip yet
  });

  it('grows to the cap for no-op jobs, at most doubling per claim', () => {
    const r = new ReadAhead(10);
    r.claimed(2, 0);
    finish(r, 10, 0.02);
    expect(claimUntilSteady(r, 2)).toEqual([10, 20, 40, 80, 160, 320, 490, 490]);
    expect(r.max).toBe(490); // 500 in hand
  });

  it('caps what is in hand at 500, and reads nothing ahead at a concurrency of 500 or more', () => {
    expect(new ReadAhead(50).max).toBe(450);
    const big = new ReadAhead(600);
    big.claimed(2, 0);
    finish(big, 10, 0.01);
    expect(big.max).toBe(0);
    expect(big.size).toBe(0);
  });

  it('covers two round trips of work: concurrency x 2 x round trip / job duration', () => {
    const r = new ReadAhead(10);
    r.claimed(5, 0);
    finish(r, 1, 1); // 1 ms jobs, 5 ms claims: 10 slots finish 100 jobs in two round trips
    expect(claimUntilSteady(r, 5).at(-1)).toBe(100);
  });

  it('reads nothing ahead of 2 s jobs, and one or two of 50 ms jobs', () => {
    const slow = new ReadAhead(10);
    slow.claimed(3, 0);
    finish(slow, 5, 2_000);
    expect(claimUntilSteady(slow, 3).at(-1)).toBe(0);
    const medium = new ReadAhead(10);
    medium.claimed(4, 0);
    finish(medium, 5, 50);
    expect(claimUntilSteady(medium, 4).at(-1)).toBe(1); // 10 x 8 / 50
  });

  it('shrinks at once when a slow job finishes after fast ones, and grows back over a few dozen', () => {
    const r = new ReadAhead(10);
    r.claimed(2, 0);
    finish(r, 20, 0.02);
    claimUntilSteady(r, 2);
    expect(r.size).toBe(490);
    r.jobFinished(400);
    expect(r.size).toBe(0); // 10 x 4 / 200
    finish(r, 30, 0.02);
    expect(r.size).toBeGreaterThan(0);
    finish(r, 100, 0.02);
    expect(r.size).toBe(490); // no claim ran meanwhile: the ceiling is where it was
  });

  it('restarts the doubling after the read-ahead shrank', () => {
    const r = new ReadAhead(10);
    r.claimed(2, 0);
    finish(r, 20, 0.02);
    claimUntilSteady(r, 2);
    r.jobFinished(1_000);
    r.claimed(2, r.size); // a claim made with read-ahead 0
    finish(r, 200, 0.02);
    expect(r.size).toBe(10); // back to concurrency, then doubling again
  });

  it('gives back the buffered jobs beyond the read-ahead once they hold more than MAX_HOLD_MS of work', () => {
    const r = new ReadAhead(10);
    r.claimed(2, 0);
    finish(r, 20, 0.02);
    claimUntilSteady(r, 2);
    expect(r.surplus(490)).toBe(0); // no-op jobs: 490 of them are a millisecond of work
    r.jobFinished(400); // estimate now 200 ms: 490 buffered are 9.8 s of work for 10 slots
    expect(r.surplus(490)).toBe(490);
    expect(r.surplus(0)).toBe(0);
    // Under MAX_HOLD_MS: kept (10 slots x MAX_HOLD_MS / 200 ms = 50 jobs; the estimate is a hair over 200 ms).
    expect(r.surplus((10 * MAX_HOLD_MS) / 200 - 1)).toBe(0);
    expect(r.surplus((10 * MAX_HOLD_MS) / 200 + 1)).toBe(51);
  });

  it('counts a stall (no slot freed for a while) as a sample when it is above the estimate', () => {
    const r = new ReadAhead(10);
    r.claimed(2, 0);
    finish(r, 20, 0.02);
    claimUntilSteady(r, 2);
    r.stalled(0.001); // below the estimate: no news
    expect(r.size).toBe(490);
    expect(r.surplus(490)).toBe(0);
    r.stalled(10); // estimate ~5 ms: 490 x 5 / 10 = 245 ms of work, kept; read-ahead 10 x 4 / 5
    expect(r.surplus(490)).toBe(0);
    expect(r.size).toBe(7);
    r.stalled(300); // ~150 ms: 7.4 s of work; read-ahead 0, so the whole buffer goes back
    expect(r.surplus(490)).toBe(490);
    expect(r.size).toBe(0); // and is not claimed again
    const fresh = new ReadAhead(4); // no job finished yet: the stall is the first sample
    fresh.claimed(2, 0);
    fresh.stalled(500);
    expect(fresh.surplus(100)).toBe(100);
  });

  it('keeps a buffer that is only a few round trips of a slow database', () => {
    const r = new ReadAhead(10);
    r.claimed(400, 0); // claims of 400 ms
    finish(r, 10, 10);
    claimUntilSteady(r, 400);
    const size = r.size; // 10 x 800 / 10 = 800, capped at 490
    expect(size).toBe(490);
    expect(r.surplus(size)).toBe(0); // 490 ms of work, under 4 round trips
  });
});
