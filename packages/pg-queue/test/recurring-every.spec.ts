import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { QueueService, RecurringJob, type Job, type ScheduleInfo, type ScheduleSpec } from 'nestjs-pg-queue';
import { RecurringScheduler } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { startApp, sqlPool, useTestApp, waitFor } from './support/test-app.js';

// Richer recurring schedules (issue 43) in one process: `every` (a fixed interval from the last fire, by the database
// clock), `limit`, `startDate` / `endDate`, the payload template, what upsertSchedule and the decorator refuse, and how
// a changed definition keeps or moves the next fire. Each claim across OS processes (SIGKILLed too) is in
// recurring-every-processes.spec.ts. Every assertion reads background_jobs and background_schedules.

const logs: string[] = [];
const logger = {
  log: (m: unknown) => void logs.push(String(m)),
  warn: (m: unknown) => void logs.push(String(m)),
  error: (m: unknown) => void logs.push(String(m)),
  debug: () => undefined,
  verbose: () => undefined,
  fatal: () => undefined,
};

interface Fire {
  id: string;
  fireAt: number;
  runAt: number;
  createdAt: number;
  payload: Record<string, unknown>;
}

describe('every, limit, startDate / endDate and the payload template', () => {
  // No workers: the fired jobs stay queued, as the tick wrote them.
  const ctx = useTestApp('recurringevery', { queue: { workers: false, maintenance: { enabled: false }, recurring: { pollIntervalMs: 200 } } });
  const queue = () => ctx.app.get(QueueService);
  const dbNow = async () => (await ctx.db.query<{ now: Date }>('SELECT now()')).rows[0].now.getTime();

  /** The jobs a schedule fired into its queue (the queue of its name), in fire order. */
  async function fires(queueName: string): Promise<Fire[]> {
    const { rows } = await ctx.db.query<{ id: string; fire_at: string; run_at: Date; created_at: Date; payload: Record<string, unknown> }>(
      `SELECT id::text, payload->'_schedule'->>'fireAt' AS fire_at, run_at, created_at, payload FROM background_jobs WHERE queue_name = $1 ORDER BY run_at, id`,
      [queueName],
    );
    return rows.map((r) => ({ id: r.id, fireAt: new Date(r.fire_at).getTime(), runAt: r.run_at.getTime(), createdAt: r.created_at.getTime(), payload: r.payload }));
  }

  const row = async (name: string) =>
    (await ctx.db.query(`SELECT every_ms::int, fire_limit::int, fires::int, start_at, end_at, next_fire_at, last_fire_at, revision::int FROM background_schedules WHERE name = $1`, [name])).rows[0];

  const ended = (name: string, timeoutMs = 15_000) =>
    waitFor(`schedule ${name} ended`, async () => {
      const s = await queue().schedule(name);
      return s?.ended ? s : undefined;
    }, timeoutMs, 100);

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['cron and every both', { cron: '* * * * *', every: 5_000 }, /both cron "\* \* \* \* \*" and every 5000 given: a schedule fires on a cron expression or at a fixed interval, give one of them/],
    ['neither cron nor every', {}, /neither cron nor every given/],
    ['every under one second', { every: 500 }, /invalid every 500: expected an integer number of milliseconds from 1000 \(1 s\)/],
    ['every not an integer', { every: 1_500.5 }, /invalid every 1500\.5/],
    ['every as text', { every: '1000' }, /invalid every "1000"/],
    ['limit 0', { every: 1_000, limit: 0 }, /invalid limit 0: expected a positive integer/],
    ['limit not an integer', { every: 1_000, limit: 2.5 }, /invalid limit 2\.5/],
    ['limit negative', { cron: '* * * * *', limit: -3 }, /invalid limit -3/],
    ['startDate not a date', { every: 1_000, startDate: 'tomorrow' }, /invalid startDate "tomorrow": expected a Date or an ISO 8601 date-time with its offset/],
    ['startDate that does not exist', { every: 1_000, startDate: '2026-02-30T08:00:00Z' }, /invalid startDate "2026-02-30T08:00:00Z": no such date-time \(February 2026 has 28 days\)/],
    ['startDate without an offset', { every: 1_000, startDate: '2026-12-01T08:00:00' }, /invalid startDate "2026-12-01T08:00:00": expected a Date or an ISO 8601 date-time with its offset/],
    ['an Invalid Date', { every: 1_000, endDate: new Date('nope') }, /invalid endDate: an Invalid Date/],
    ['endDate before startDate', { every: 1_000, startDate: '2026-12-02T00:00:00Z', endDate: '2026-12-01T00:00:00Z' }, /endDate 2026-12-01T00:00:00\.000Z is not after startDate 2026-12-02T00:00:00\.000Z/],
    ['endDate equal to startDate', { every: 1_000, startDate: new Date('2026-12-01T00:00:00Z'), endDate: '2026-12-01T01:00:00+01:00' }, /endDate 2026-12-01T00:00:00\.000Z is not after startDate/],
    ['no cron fire between the dates', { cron: '0 0 1 1 *', startDate: '2026-02-01T00:00:00Z', endDate: '2026-03-01T00:00:00Z' }, /cron "0 0 1 1 \*" has no fire time between startDate .* and endDate .*: the schedule would never fire/],
    ['missedFires with every', { every: 1_000, missedFires: 'latest' }, /missedFires "latest" given with every: missed fires are a cron schedule's/],
    ['an unknown placeholder', { every: 1_000, payload: { file: 'report-{{fireDay}}.csv' } }, /invalid payload template: payload\.file holds the placeholder \{\{fireDay\}\}, which is none of \{\{fireAt\}\}, \{\{fireDate\}\}, \{\{name\}\}/],
    ['an unknown placeholder deep in a list', { cron: '* * * * *', payload: { a: [{ b: 'x {{when}}' }] } }, /invalid payload template: payload\.a\[0\]\.b holds the placeholder \{\{when\}\}/],
  ])('upsertSchedule refuses %s, naming the problem, and stores nothing', async (_case, options, message) => {
    const spec = { name: 'bad', queue: 'bad', ...options } as unknown as ScheduleSpec;
    await expect(queue().upsertSchedule(spec)).rejects.toThrow(new RegExp(`^upsertSchedule\\("bad"\\): ${message.source}`));
    expect(await queue().schedule('bad')).toBeNull();
  });

  it('every: fires one interval after it is stored, then every interval from the last fire by the database clock; the limit stops it and it says so', async () => {
    ctx.app.useLogger(logger);
    const before = await dbNow();
    const created = await queue().upsertSchedule({ name: 'every-3', every: 1_000, limit: 3, queue: 'every-3' });
    expect(created).toMatchObject({ every: 1_000, cron: null, limit: 3, fires: 0, firesLeft: 3, ended: null, startDate: null, endDate: null, missedFires: 'skip' });
    expect(created.nextFireAt!.getTime()).toBeGreaterThanOrEqual(before + 1_000);
    expect(created.nextFireAt!.getTime()).toBeLessThan(before + 2_000);
    const info = await ended('every-3');
    const got = await fires('every-3');
    expect(got).toHaveLength(3);
    expect(got[0].fireAt).toBeGreaterThanOrEqual(created.nextFireAt!.getTime());
    for (let i = 1; i < got.length; i++) {
      // At least the interval apart (the fire time is the claim's clock); late by a tick's latency at most.
      expect(got[i].fireAt - got[i - 1].fireAt).toBeGreaterThanOrEqual(1_000);
      expect(got[i].fireAt - got[i - 1].fireAt).toBeLessThan(2_500);
    }
    for (const f of got) {
      expect(f.runAt).toBe(f.fireAt); // due at once: the fire time is the claim's own clock
      expect(f.createdAt).toBeGreaterThanOrEqual(f.fireAt); // inserted in the claim's transaction
      expect(f.createdAt - f.fireAt).toBeLessThan(1);
      expect(f.payload).toEqual({ _schedule: { name: 'every-3', fireAt: new Date(f.fireAt).toISOString() } });
    }
    expect(info).toMatchObject({ fires: 3, firesLeft: 0, ended: 'limit', nextFireAt: null });
    expect(info.lastFireAt!.getTime()).toBe(got[2].fireAt);
    expect(logs.filter((l) => l.includes('schedule "every-3" fires no more'))).toEqual([
      'recurring jobs: schedule "every-3" fires no more: its limit of 3 fire(s) is reached (3 fire(s) in all); schedules() shows it ended (upsertSchedule with a higher limit or a later endDate brings it back)',
    ]);
    // Nothing more, however many ticks run.
    await ctx.app.get(RecurringScheduler).runOnce();
    await new Promise((r) => setTimeout(r, 1_200));
    expect(await fires('every-3')).toHaveLength(3);
  });

  it('every with startDate and endDate: the first fire at the start, none before it, none after the end, then ended', async () => {
    const now = await dbNow();
    const start = new Date(Math.ceil((now + 1_500) / 1_000) * 1_000);
    const end = new Date(start.getTime() + 2_500);
    const created = await queue().upsertSchedule({ name: 'every-window', every: 1_000, queue: 'every-window', startDate: start, endDate: end.toISOString() });
    expect(created.nextFireAt).toEqual(start);
    expect(created).toMatchObject({ startDate: start, endDate: end, ended: null });
    const info = await ended('every-window');
    expect(info.ended).toBe('endDate');
    const got = await fires('every-window');
    expect(got.length).toBeGreaterThanOrEqual(2); // start, start + 1 s, start + 2 s when no tick is late
    expect(got.length).toBeLessThanOrEqual(3);
    expect(got[0].fireAt).toBeGreaterThanOrEqual(start.getTime());
    expect(got.at(-1)!.fireAt).toBeLessThanOrEqual(end.getTime());
    for (let i = 1; i < got.length; i++) expect(got[i].fireAt - got[i - 1].fireAt).toBeGreaterThanOrEqual(1_000);
    expect(info.fires).toBe(got.length);
  });

  it('cron with startDate, endDate and limit: exactly the fire times in between, the earliest up to the limit', async () => {
    const now = await dbNow();
    const start = Math.ceil((now + 1_500) / 1_000) * 1_000;
    const window = { missedFires: { windowMs: 60_000 } }; // a late tick catches up: the fire times are exact
    await queue().upsertSchedule({ name: 'cron-window', cron: '* * * * * *', queue: 'cron-window', startDate: new Date(start), endDate: new Date(start + 3_000), ...window });
    await queue().upsertSchedule({ name: 'cron-limit', cron: '* * * * * *', queue: 'cron-limit', startDate: new Date(start), limit: 2, ...window });
    expect((await queue().schedule('cron-window'))!.nextFireAt!.getTime()).toBe(start);
    expect((await ended('cron-window')).ended).toBe('endDate');
    expect((await ended('cron-limit')).ended).toBe('limit');
    expect((await fires('cron-window')).map((f) => f.fireAt - start)).toEqual([0, 1_000, 2_000, 3_000]);
    expect((await fires('cron-limit')).map((f) => f.fireAt - start)).toEqual([0, 1_000]);
    expect(await row('cron-limit')).toMatchObject({ fires: 2, fire_limit: 2, next_fire_at: null });
  });

  it('a catch-up after a downtime stops at the limit (the earliest fires), and one over the end fires nothing', async () => {
    const scheduler = ctx.app.get(RecurringScheduler);
    const year = new Date(await dbNow()).getUTCFullYear();
    const newYear = (y: number) => new Date(Date.UTC(y, 0, 1)).toISOString();
    await queue().upsertSchedule({ name: 'yearly-2', cron: '0 0 1 1 *', queue: 'yearly-2', missedFires: { windowMs: 1_500 * 86_400_000 }, limit: 2 });
    await queue().upsertSchedule({ name: 'yearly-ended', cron: '0 0 1 1 *', queue: 'yearly-ended', missedFires: { windowMs: 1_500 * 86_400_000 }, endDate: new Date(Date.UTC(year - 1, 5, 1)) });
    // As if every instance had been down since before 1 January two years ago (the end passed during the downtime).
    await ctx.db.query(`UPDATE background_schedules SET next_fire_at = $1 WHERE name IN ('yearly-2', 'yearly-ended')`, [newYear(year - 2)]);
    await scheduler.runOnce();
    await waitFor('both claimed', async () => (await ctx.db.query(`SELECT 1 FROM background_schedules WHERE name IN ('yearly-2', 'yearly-ended') AND next_fire_at IS NOT NULL`)).rowCount === 0);
    expect((await fires('yearly-2')).map((f) => new Date(f.fireAt).toISOString())).toEqual([newYear(year - 2), newYear(year - 1)]);
    expect((await fires('yearly-ended')).map((f) => new Date(f.fireAt).toISOString())).toEqual([newYear(year - 2), newYear(year - 1)]);
    expect(await queue().schedule('yearly-2')).toMatchObject({ ended: 'limit', fires: 2, firesLeft: 0 });
    expect(await queue().schedule('yearly-ended')).toMatchObject({ ended: 'endDate', fires: 2, firesLeft: null });

    // An every schedule whose end passed while no instance ran: the claim ends it without a fire.
    await queue().upsertSchedule({ name: 'every-late', every: 60_000, queue: 'every-late', endDate: new Date(Date.now() + 3_600_000) });
    await ctx.db.query(`UPDATE background_schedules SET next_fire_at = now() - interval '1 hour', end_at = now() - interval '30 minutes' WHERE name = 'every-late'`);
    await scheduler.runOnce();
    expect((await ended('every-late')).ended).toBe('endDate');
    expect(await fires('every-late')).toEqual([]);
    expect(await row('every-late')).toMatchObject({ fires: 0, last_fire_at: null });
  });

  it('the payload template: {{fireAt}}, {{fireDate}} in the time zone and {{name}} in any string, at any depth; fireSchedule fills it too and is not counted', async () => {
    const template = { report: 'daily-{{fireDate}}.csv', at: '{{fireAt}}', who: '{{name}}', nested: { list: ['{{fireAt}}', 1, true, null], again: '{{name}}/{{name}}' }, plain: 'no placeholder', n: 7 };
    const timeZone = 'Pacific/Kiritimati'; // UTC+14: its day is the UTC day's next for ten hours of each day
    await queue().upsertSchedule({ name: 'templated', every: 1_000, limit: 1, queue: 'templated', timeZone, payload: template });
    await ended('templated');
    const dayIn = (ms: number) => new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(ms);
    const [fired] = await fires('templated');
    const at = new Date(fired.fireAt).toISOString();
    expect(fired.payload).toEqual({
      report: `daily-${dayIn(fired.fireAt)}.csv`,
      at,
      who: 'templated',
      nested: { list: [at, 1, true, null], again: 'templated/templated' },
      plain: 'no placeholder',
      n: 7,
      _schedule: { name: 'templated', fireAt: at },
    });
    // The stored template keeps its placeholders.
    expect((await queue().schedule('templated'))!.payload).toEqual(template);

    const id = await queue().fireSchedule('templated');
    const { rows } = await ctx.db.query<{ payload: Record<string, unknown> }>(`SELECT payload FROM background_jobs WHERE id = $1`, [id]);
    const manual = rows[0].payload as { at: string; who: string; _schedule: { fireAt: string } };
    expect(manual.at).toBe(manual._schedule.fireAt);
    expect(manual.who).toBe('templated');
    expect(await queue().schedule('templated')).toMatchObject({ fires: 1, firesLeft: 0, ended: 'limit' }); // not counted

    // A template written by SQL: its placeholders are filled in; one the library does not know stays as text.
    await ctx.db.query(
      `INSERT INTO background_schedules (name, queue_name, every_ms, payload, next_fire_at, fire_limit, source)
       VALUES ('sql-template', 'sql-template', 60000, '{"day": "{{fireDate}}", "odd": "{{unknown}}"}', now() - interval '1 second', 1, 'runtime')`,
    );
    await ended('sql-template');
    const [sqlFire] = await fires('sql-template');
    expect(sqlFire.payload).toMatchObject({ day: new Date(sqlFire.fireAt).toISOString().slice(0, 10), odd: '{{unknown}}' });
  });

  it('a changed definition: a new interval or start moves the next fire, a new payload keeps it; the count of fires stays; a higher limit or a later end brings an ended schedule back', async () => {
    const q = queue();
    const base = { name: 'changes', queue: 'changes', every: 60_000 } as const;
    const first = await q.upsertSchedule(base);
    const samePlan = await q.upsertSchedule({ ...base, payload: { v: 2 } });
    expect(samePlan.nextFireAt).toEqual(first.nextFireAt);
    const slower = await q.upsertSchedule({ ...base, every: 120_000 });
    expect(slower.nextFireAt!.getTime() - first.nextFireAt!.getTime()).toBeGreaterThanOrEqual(59_000);
    const later = new Date(Date.now() + 86_400_000);
    expect((await q.upsertSchedule({ ...base, every: 120_000, startDate: later })).nextFireAt).toEqual(later);
    // Without the start again: one interval from now. An end before the stored next fire ends it; a later one
    // brings it back, from its first fire after now; an end that only moves keeps the next fire within it.
    const plain = await q.upsertSchedule({ ...base, every: 120_000 });
    expect(plain.nextFireAt!.getTime()).toBeLessThan(Date.now() + 121_000);
    const cut = await q.upsertSchedule({ ...base, every: 120_000, endDate: new Date(plain.nextFireAt!.getTime() - 1_000) });
    expect(cut).toMatchObject({ ended: 'endDate', nextFireAt: null });
    const back = await q.upsertSchedule({ ...base, every: 120_000, endDate: new Date(Date.now() + 86_400_000) });
    expect(back).toMatchObject({ ended: null });
    expect(back.nextFireAt!.getTime()).toBeGreaterThanOrEqual(plain.nextFireAt!.getTime());
    const moved = await q.upsertSchedule({ ...base, every: 120_000, endDate: new Date(Date.now() + 2 * 86_400_000) });
    expect(moved.nextFireAt).toEqual(back.nextFireAt);

    // As if it had fired 5 times: a limit of 3 ends it at once, one of 10 leaves 5.
    await ctx.db.query(`UPDATE background_schedules SET fires = 5 WHERE name = 'changes'`);
    const spent = await q.upsertSchedule({ ...base, limit: 3 });
    expect(spent).toMatchObject({ ended: 'limit', nextFireAt: null, fires: 5, firesLeft: 0 });
    // Paused and resumed, an ended schedule stays ended.
    expect(await q.pauseSchedule('changes')).toBe(true);
    expect(await q.resumeSchedule('changes')).toBe(true);
    expect(await q.schedule('changes')).toMatchObject({ paused: false, ended: 'limit', nextFireAt: null });
    const more = await q.upsertSchedule({ ...base, limit: 10 });
    expect(more).toMatchObject({ ended: null, fires: 5, firesLeft: 5 });
    expect(more.nextFireAt!.getTime()).toBeGreaterThan(Date.now() + 50_000);
    // A cron schedule, and back: the interval's column is cleared, and the other way round.
    const cron = await q.upsertSchedule({ name: 'changes', queue: 'changes', cron: '0 3 * * *' });
    expect(cron).toMatchObject({ cron: '0 3 * * *', every: null, limit: null, firesLeft: null, fires: 5, ended: null });
    expect(await row('changes')).toMatchObject({ every_ms: null });
  });
});

describe('@RecurringJob with every, limit and dates', () => {
  it.each<[string, () => unknown, RegExp]>([
    ['every under a second', () => RecurringJob({ every: 500 }), /@RecurringJob on BadEvery\.run: invalid every 500/],
    ['cron and every', () => RecurringJob('* * * * *', { every: 60_000 }), /@RecurringJob on BadEvery\.run: both cron "\* \* \* \* \*" and every 60000 given/],
    ['neither', () => RecurringJob({} as never), /@RecurringJob on BadEvery\.run: neither cron nor every given/],
    ['cron twice', () => RecurringJob('* * * * *', { cron: '0 * * * *' }), /@RecurringJob on BadEvery\.run: cron given twice/],
    ['a limit of 0', () => RecurringJob({ every: 1_000, limit: 0 }), /@RecurringJob on BadEvery\.run: invalid limit 0/],
    ['an end before the start', () => RecurringJob({ every: 1_000, startDate: '2026-06-01T00:00:00Z', endDate: '2026-05-01T00:00:00Z' }), /@RecurringJob on BadEvery\.run: endDate 2026-05-01T00:00:00\.000Z is not after startDate/],
    ['missedFires with every', () => RecurringJob({ every: 1_000, missedFires: { windowMs: 5_000 } }), /@RecurringJob on BadEvery\.run: missedFires \{"windowMs":5000\} given with every/],
  ])('%s fails the boot, naming the method', async (_case, decorator, message) => {
    const url = await createTestDatabase('recurringeverybad');
    @Injectable()
    class BadEvery {
      @(decorator() as MethodDecorator)
      async run() {}
    }
    await expect(startApp(url, { providers: [BadEvery], queue: { workers: false, maintenance: { enabled: false } } })).rejects.toThrow(message);
  });

  it('a code schedule with every and a limit fires its limit across restarts, then stays ended; a cron given in the options works as the first argument', async () => {
    const url = await createTestDatabase('recurringeverycode');
    const db = sqlPool(url);
    const seen: string[] = [];
    @Injectable()
    class Pulses {
      @RecurringJob({ name: 'pulse', every: 1_000, limit: 2, payload: { tag: '{{name}}@{{fireAt}}' } })
      async pulse(job: Job<{ tag: string; _schedule: { fireAt: string } }>) {
        seen.push(job.payload.tag);
        expect(job.payload.tag).toBe(`pulse@${job.payload._schedule.fireAt}`);
      }

      @RecurringJob({ name: 'once', cron: '* * * * * *', limit: 1 })
      async once() {}
    }
    const options = { providers: [Pulses], queue: { maintenance: { enabled: false }, recurring: { pollIntervalMs: 200 } } };
    let app = await startApp(url, options);
    try {
      await waitFor('pulse ended', async () => (await db.query(`SELECT 1 FROM background_schedules WHERE name = 'pulse' AND next_fire_at IS NULL`)).rowCount === 1, 10_000);
      await waitFor('two runs', async () => seen.length === 2, 10_000);
      const info = (await app.get(QueueService).schedules()).map((s: ScheduleInfo) => [s.name, s.source, s.every, s.cron, s.fires, s.ended]);
      await waitFor('once ended', async () => (await db.query(`SELECT 1 FROM background_schedules WHERE name = 'once' AND next_fire_at IS NULL`)).rowCount === 1, 10_000);
      expect(info.find((i) => i[0] === 'pulse')).toEqual(['pulse', 'code', 1_000, null, 2, 'limit']);
      await app.close();
      // The same code again: the count of fires is the row's, so nothing fires any more.
      app = await startApp(url, options);
      await new Promise((r) => setTimeout(r, 2_500));
      const { rows } = await db.query(`SELECT queue_name, count(*)::int AS n FROM background_jobs GROUP BY 1 ORDER BY 1`);
      expect(rows).toEqual([{ queue_name: 'once', n: 1 }, { queue_name: 'pulse', n: 2 }]);
      expect((await db.query(`SELECT revision::int FROM background_schedules WHERE name = 'pulse'`)).rows[0].revision).toBe(1);
    } finally {
      await app.close();
      await db.end();
    }
  }, 30_000);
});
