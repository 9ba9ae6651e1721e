import { inspect } from 'node:util';

/**
 * Whether `actual` (a job's payload, JSON) holds `expected`: objects may have more keys than expected names,
 * arrays must have the same length with each element matching, anything else is compared with Object.is.
 * Jest's asymmetric matchers (expect.any(String), expect.stringContaining(...)) work where a value goes.
 */
export function matchesPartial(actual: unknown, expected: unknown): boolean {
  if (isAsymmetricMatcher(expected)) return expected.asymmetricMatch(actual);
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && actual.length === expected.length && expected.every((e, i) => matchesPartial(actual[i], e));
  }
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
    const record = actual as Record<string, unknown>;
    return Object.entries(expected).every(([key, value]) => key in record && matchesPartial(record[key], value));
  }
  return Object.is(actual, expected);
}

/** How many of `expected`'s top-level keys `actual` matches: picks the job to diff against when none matches. */
export function closeness(actual: unknown, expected: unknown): number {
  if (expected === null || typeof expected !== 'object' || actual === null || typeof actual !== 'object') return 0;
  const record = actual as Record<string, unknown>;
  return Object.entries(expected).filter(([key, value]) => key in record && matchesPartial(record[key], value)).length;
}

/** One line of a value, short enough for a list of jobs. */
export function show(value: unknown): string {
  return inspect(value, { depth: 6, breakLength: Infinity, maxStringLength: 200, maxArrayLength: 20 });
}

/**
 * Jest's diff of `actual` against `expected` (toMatchObject), when the test runs under Jest; undefined otherwise.
 * The kit never imports Jest: it uses the global `expect` Jest injects, if there is one.
 */
export function jestDiff(actual: unknown, expected: unknown): string | undefined {
  const expect = (globalThis as { expect?: (value: unknown) => { toMatchObject(expected: unknown): void } }).expect;
  if (typeof expect !== 'function' || !isPlainObject(actual) || !isPlainObject(expected)) return undefined;
  try {
    expect(actual).toMatchObject(expected);
  } catch (error) {
    return error instanceof Error ? error.message : undefined;
  }
  return undefined;
}

function isPlainObject(value: unknown): value is object {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function isAsymmetricMatcher(value: unknown): value is { asymmetricMatch(actual: unknown): boolean } {
  return value !== null && typeof value === 'object' && typeof (value as { asymmetricMatch?: unknown }).asymmetricMatch === 'function';
}
