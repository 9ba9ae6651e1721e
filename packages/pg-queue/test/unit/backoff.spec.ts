import { describe, expect, it } from '@jest/globals';
import { MAX_RETRY_DELAY_MS } from '../../src/pg-queue.messages.js';
import { exponentialBackoff, retryDelay } from '../../src/utils/backoff.js';
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

describe('retryDelay: what a custom backoff returns, made a delay the database can store', () => {
  const cap = MAX_RETRY_DELAY_MS;
  it('passes a usable delay through, rounded', () => {
    expect(retryDelay(() => 1_234.4, 1, null, 'q')).toEqual({ delayMs: 1_234 });
    expect(retryDelay(() => 0, 1, null, 'q')).toEqual({ delayMs: 0 });
    expect(retryDelay(() => cap, 1, null, 'q')).toEqual({ delayMs: cap });
  });
  it.each([
    ['Infinity', Infinity, cap],
    ['1e300', 1e300, cap],
    ['a year and a day', cap + 86_400_000, cap],
    ['NaN', NaN, 0],
    ['-Infinity', -Infinity, 0],
    ['a negative number', -5, 0],
    ['a string', '100', 0],
    ['an object', { ms: 5 }, 0],
    ['undefined', undefined, 0],
  ])('clamps %s and says what was wrong, naming the queue', (_, value, expected) => {
    const { delayMs, problem } = retryDelay(() => value as number, 1, null, 'emails');
    expect(delayMs).toBe(expected);
    expect(Number.isFinite(delayMs)).toBe(true);
    expect(problem).toMatch(/^backoff of queue "emails" returned .+; the retry waits \d+ ms instead/);
  });
  it('names the number it got, not its JSON', () => {
    expect(retryDelay(() => Infinity, 1, null, 'q').problem).toContain('returned Infinity;');
    expect(retryDelay(() => NaN, 1, null, 'q').problem).toContain('returned NaN;');
  });
  it('describes junk a backoff returns without throwing: a revoked Proxy, a throwing toJSON and toString, a Symbol', () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    const thrower = () => {
      throw new Error('no');
    };
    const junk: [unknown, string][] = [
      [proxy, 'returned <Revoked Proxy>;'],
      [{ toJSON: thrower, toString: thrower }, 'returned { toJSON: [Function: thrower], toString: [Function: thrower] };'],
      [Symbol('s'), 'returned Symbol(s);'],
    ];
    for (const [value, text] of junk) {
      let delay: ReturnType<typeof retryDelay> | undefined;
      expect(() => (delay = retryDelay(() => value as number, 1, proxy, 'q'))).not.toThrow();
      expect(delay).toEqual({ delayMs: 0, problem: expect.stringContaining(text) });
    }
  });
  it('a backoff that throws retries without delay', () => {
    const { delayMs, problem } = retryDelay(() => { throw new TypeError('oops'); }, 1, null, 'emails');
    expect(delayMs).toBe(0);
    expect(problem).toContain('threw (TypeError: oops)');
  });
});
