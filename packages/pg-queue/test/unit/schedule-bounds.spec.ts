import { describe, expect, it } from '@jest/globals';
import { boundPlan, firstFire, type FireBounds, type FirePlan } from '../../src/recurring/fire-times.js';
import { placeholderValues, renderPayload, unknownPlaceholder } from '../../src/recurring/payload-template.js';

// Issue 43, the pure parts: a schedule's first fire, a cron plan within its limit and dates, and the payload template.

const T = Date.UTC(2026, 11, 1, 8, 0, 0); // 2026-12-01T08:00:00Z, a Tuesday
const none: FireBounds = { startMs: null, endMs: null, limit: null };

describe('firstFire', () => {
  it.each<[string, Parameters<typeof firstFire>[0], Partial<Parameters<typeof firstFire>[1]>, number, number | null]>([
    ['every: one interval from now', { everyMs: 60_000 }, {}, T + 5, T + 60_005],
    ['every: the start while it is ahead', { everyMs: 60_000 }, { startMs: T + 3_600_000 }, T, T + 3_600_000],
    ['every: a start that passed counts for nothing', { everyMs: 60_000 }, { startMs: T - 1 }, T, T + 60_000],
    ['every: past the end, none', { everyMs: 60_000 }, { endMs: T + 59_999 }, T, null],
    ['every: at the end exactly, it fires', { everyMs: 60_000 }, { endMs: T + 60_000 }, T, T + 60_000],
    ['cron: the next fire time after now', { cron: '0 * * * *', timeZone: 'UTC' }, {}, T, T + 3_600_000],
    ['cron: a fire time at the start counts', { cron: '0 * * * *', timeZone: 'UTC' }, { startMs: T + 7_200_000 }, T, T + 7_200_000],
    ['cron: the first fire time after the start', { cron: '0 * * * *', timeZone: 'UTC' }, { startMs: T + 7_200_001 }, T, T + 10_800_000],
    ['cron: in its time zone (09:00 in Berlin is 08:00Z in December; strictly after now)', { cron: '0 9 * * *', timeZone: 'Europe/Berlin' }, {}, T, Date.UTC(2026, 11, 2, 8, 0, 0)],
    ['cron: past the end, none', { cron: '0 0 1 1 *', timeZone: 'UTC' }, { endMs: T + 86_400_000 }, T, null],
  ])('%s', (_case, rule, bounds, now, expected) => {
    expect(firstFire(rule, { startMs: null, endMs: null, ...bounds }, now)).toBe(expected);
  });
});

describe('boundPlan', () => {
  const plan = (fires: number[], next: number): FirePlan => ({ fires, nextFireAtMs: next, skippedThroughMs: null });
  const hourly = (h: number) => T + h * 3_600_000;
  it.each<[string, FirePlan, Partial<FireBounds>, number, ReturnType<typeof boundPlan>]>([
    ['no bounds: as planned', plan([hourly(0), hourly(1)], hourly(2)), {}, 0, { fires: [hourly(0), hourly(1)], nextFireAtMs: hourly(2), ended: null }],
    ['a limit keeps the earliest fires and ends it', plan([hourly(0), hourly(1), hourly(2)], hourly(3)), { limit: 4 }, 2, { fires: [hourly(0), hourly(1)], nextFireAtMs: null, ended: 'limit' }],
    ['the fire that reaches the limit ends it', plan([hourly(0)], hourly(1)), { limit: 3 }, 2, { fires: [hourly(0)], nextFireAtMs: null, ended: 'limit' }],
    ['below the limit it goes on', plan([hourly(0)], hourly(1)), { limit: 3 }, 1, { fires: [hourly(0)], nextFireAtMs: hourly(1), ended: null }],
    ['fires past the end left out, and it ends', plan([hourly(0), hourly(1), hourly(2)], hourly(3)), { endMs: hourly(1) }, 0, { fires: [hourly(0), hourly(1)], nextFireAtMs: null, ended: 'endDate' }],
    ['a next fire at the end exactly goes on', plan([hourly(0)], hourly(1)), { endMs: hourly(1) }, 0, { fires: [hourly(0)], nextFireAtMs: hourly(1), ended: null }],
    ['fires before the start left out; the next one at the start', plan([hourly(0), hourly(1)], hourly(2)), { startMs: hourly(3) }, 0, { fires: [], nextFireAtMs: hourly(3), ended: null }],
    ['the limit before the end', plan([hourly(0), hourly(1)], hourly(2)), { limit: 1, endMs: hourly(5) }, 0, { fires: [hourly(0)], nextFireAtMs: null, ended: 'limit' }],
  ])('%s', (_case, planned, bounds, fires, expected) => {
    expect(boundPlan(planned, '0 * * * *', 'UTC', { ...none, ...bounds }, fires)).toEqual(expected);
  });
});

describe('the payload template', () => {
  it('fills {{fireAt}}, {{fireDate}} (in the time zone) and {{name}} in strings at any depth, and leaves the rest', () => {
    const late = Date.UTC(2026, 11, 1, 23, 30, 0);
    const template = { a: '{{fireAt}}', b: ['x-{{fireDate}}-y', 3, null, { c: '{{name}}{{name}}' }], d: false, e: '{{unknown}}', f: '{fireAt}' };
    expect(renderPayload(template, placeholderValues('nightly', late, 'Asia/Tokyo'))).toEqual({
      a: '2026-12-01T23:30:00.000Z',
      b: ['x-2026-12-02-y', 3, null, { c: 'nightlynightly' }],
      d: false,
      e: '{{unknown}}',
      f: '{fireAt}',
    });
    expect(template.a).toBe('{{fireAt}}'); // the template itself is not changed
    expect(placeholderValues('n', late, 'America/Los_Angeles').fireDate).toBe('2026-12-01');
  });

  it.each<[Record<string, unknown>, string | null]>([
    [{ a: '{{fireAt}} {{fireDate}} {{name}}' }, null],
    [{ a: '{{ fireAt }}' }, null], // not a placeholder (no spaces inside the braces): text
    [{ a: { 'b c': ['{{fireDay}}'] } }, 'payload.a["b c"][0] holds the placeholder {{fireDay}}, which is none of {{fireAt}}, {{fireDate}}, {{name}}'],
    [{ n: 1, s: 'ok', z: '{{Name}}' }, 'payload.z holds the placeholder {{Name}}, which is none of {{fireAt}}, {{fireDate}}, {{name}}'],
  ])('unknownPlaceholder(%j)', (payload, problem) => expect(unknownPlaceholder(payload)).toBe(problem));
});
