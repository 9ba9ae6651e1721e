import { describe, expect, it } from '@jest/globals';
import { MAX_FIRES_PER_CLAIM, nextFireAfter, planFires } from '../../src/recurring/fire-times.js';

const t = (iso: string) => new Date(iso).getTime();
const iso = (ms: number) => new Date(ms).toISOString();

describe('next fire time (cron-parser, time zones, DST)', () => {
  it('Europe/Berlin 2026-03-29: 02:30 does not exist; the daily 02:30 fire moves to 03:30 CEST that day', () => {
    const fires = [t('2026-03-28T12:00:00Z')];
    for (let i = 0; i < 3; i++) fires.push(nextFireAfter('30 2 * * *', 'Europe/Berlin', fires[fires.length - 1]));
    expect(fires.slice(1).map(iso)).toEqual(['2026-03-29T01:30:00.000Z', '2026-03-30T00:30:00.000Z', '2026-03-31T00:30:00.000Z']);
  });

  it('Europe/Berlin 2026-10-25: 02:30 happens twice; the daily fire runs once, at the first (CEST) one', () => {
    const fires = [t('2026-10-24T12:00:00Z')];
    for (let i = 0; i < 2; i++) fires.push(nextFireAfter('30 2 * * *', 'Europe/Berlin', fires[fires.length - 1]));
    expect(fires.slice(1).map(iso)).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z']);
  });

  it('a step schedule keeps every instant across the fall-back hour (02:00 and 02:30 twice)', () => {
    const fires = [t('2026-10-24T23:50:00Z')];
    for (let i = 0; i < 5; i++) fires.push(nextFireAfter('*/30 * * * *', 'Europe/Berlin', fires[fires.length - 1]));
    expect(fires.slice(1).map(iso)).toEqual([
      '2026-10-25T00:00:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-25T01:00:00.000Z', '2026-10-25T01:30:00.000Z', '2026-10-25T02:00:00.000Z',
    ]);
  });

  it('is strictly after the given instant, with a seconds field', () => {
    expect(iso(nextFireAfter('* * * * * *', 'UTC', t('2026-01-01T00:00:00.000Z')))).toBe('2026-01-01T00:00:01.000Z');
    expect(iso(nextFireAfter('* * * * * *', 'UTC', t('2026-01-01T00:00:00.400Z')))).toBe('2026-01-01T00:00:01.000Z');
  });
});

describe('planFires (missed-fire policies)', () => {
  const yearly = '0 0 1 1 *';
  const now = t('2026-11-30T12:00:00Z');
  const seen = t('2024-01-01T00:00:00Z'); // three fires missed: 2024, 2025, 2026

  it('a fire that is due now is enqueued under every policy', () => {
    for (const missed of [{ policy: 'skip' }, { policy: 'latest' }, { policy: 'window', windowMs: 1 }] as const) {
      const plan = planFires('* * * * * *', 'UTC', missed, t('2026-11-30T12:00:00Z'), t('2026-11-30T12:00:00.300Z'));
      expect(plan.fires.map(iso)).toEqual(['2026-11-30T12:00:00.000Z']);
      expect(iso(plan.nextFireAtMs)).toBe('2026-11-30T12:00:01.000Z');
    }
  });

  it('a fire exactly at now is due (prev is inclusive of now)', () => {
    const plan = planFires('* * * * * *', 'UTC', { policy: 'skip' }, t('2026-11-30T12:00:00Z'), t('2026-11-30T12:00:00Z'));
    expect(plan.fires.map(iso)).toEqual(['2026-11-30T12:00:00.000Z']);
  });

  it('skip: missed fires are dropped; the next fire is in the future', () => {
    const plan = planFires(yearly, 'UTC', { policy: 'skip' }, seen, now);
    expect(plan.fires).toEqual([]);
    expect(iso(plan.nextFireAtMs)).toBe('2027-01-01T00:00:00.000Z');
    expect(iso(plan.skippedThroughMs!)).toBe('2026-01-01T00:00:00.000Z');
  });

  it('latest: one job, for the latest missed fire', () => {
    const plan = planFires(yearly, 'UTC', { policy: 'latest' }, seen, now);
    expect(plan.fires.map(iso)).toEqual(['2026-01-01T00:00:00.000Z']);
    expect(iso(plan.skippedThroughMs!)).toBe('2025-01-01T00:00:00.000Z');
  });

  it('window: every missed fire within the window, oldest first', () => {
    expect(planFires(yearly, 'UTC', { policy: 'window', windowMs: 400 * 86_400_000 }, seen, now).fires.map(iso)).toEqual(['2026-01-01T00:00:00.000Z']);
    expect(planFires(yearly, 'UTC', { policy: 'window', windowMs: 800 * 86_400_000 }, seen, now).fires.map(iso)).toEqual(['2025-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z']);
    const all = planFires(yearly, 'UTC', { policy: 'window', windowMs: 5_000 * 86_400_000 }, seen, now);
    expect(all.fires.map(iso)).toEqual(['2024-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z']);
    expect(all.skippedThroughMs).toBeNull();
  });

  it('window after a long downtime of a per-second schedule: at most MAX_FIRES_PER_CLAIM, the latest', () => {
    const plan = planFires('* * * * * *', 'UTC', { policy: 'window', windowMs: 86_400_000 }, now - 7_200_000, now);
    expect(plan.fires).toHaveLength(MAX_FIRES_PER_CLAIM);
    expect(plan.fires[plan.fires.length - 1]).toBe(now);
  });

  // Issue 18, item 3: on a fall-back day 02:30 happens twice; planning (next() after next()) fires it once, but
  // the window walked back with prev(), which returned both, so a daily job fired twice after an outage.
  it('window and latest across a DST fall-back: a local time that happens twice fires once, as planned', () => {
    const daily = '30 2 * * *';
    const row = t('2026-10-25T00:30:00Z'); // the row's next fire: 02:30 CEST, as the fire before planned it
    const after = t('2026-10-25T03:00:00Z'); // an outage from 00:00Z to 03:00Z
    const window = planFires(daily, 'Europe/Berlin', { policy: 'window', windowMs: 86_400_000 }, row, after);
    expect(window.fires.map(iso)).toEqual(['2026-10-25T00:30:00.000Z']);
    expect(iso(window.nextFireAtMs)).toBe('2026-10-26T01:30:00.000Z');
    const latest = planFires(daily, 'Europe/Berlin', { policy: 'latest' }, row, after);
    expect(latest.fires.map(iso)).toEqual(['2026-10-25T00:30:00.000Z']);
    // A step schedule keeps both 02:30s (cron-parser plans every instant of it): the window keeps them too.
    const steps = planFires('*/30 * * * *', 'Europe/Berlin', { policy: 'window', windowMs: 86_400_000 }, t('2026-10-25T00:00:00Z'), t('2026-10-25T01:45:00Z'));
    expect(steps.fires.map(iso)).toEqual(['2026-10-25T00:00:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-25T01:00:00.000Z', '2026-10-25T01:30:00.000Z']);
  });
});
