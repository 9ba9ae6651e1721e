import { describe, expect, it, jest } from '@jest/globals';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { JobHandler, QueueService, RecurringJob, type Job, type RecurringJobPayload } from 'nestjs-pg-queue';
import { RecurringScheduler } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { ScheduleStore } from '../src/store/schedule.store.js';
import { startApp, sqlPool, useTestApp, waitFor } from './support/test-app.js';

// Recurring jobs in one process: declared and runtime schedules, missed-fire policies, boot sync and its
// errors, orphaned code schedules. The exactly-once race across OS processes is in recurring-processes.spec.ts.

const runs: { queue: string; fireAt: string; runAt: string; payload: unknown }[] = [];

@Injectable()
class Ticker {
  @RecurringJob('* * * * * *', { name: 'every-second', payload: { greeting: 'hi' }, maxAttempts: 2 })
  async tick(job: Job<RecurringJobPayload<{ greeting: string }>>) {
    runs.push({ queue: job.queue, fireAt: job.payload._schedule.fireAt, runAt: job.runAt.toISOString(), payload: job.payload });
  }

  @JobHandler('runtime-target')
  async target(job: Job<RecurringJobPayload>) {
    runs.push({ queue: job.queue, fireAt: job.payload._schedule.fireAt, runAt: job.runAt.toISOString(), payload: job.payload });
  }
}

describe('recurring jobs', () => {
  const ctx = useTestApp('recurring', { providers: [Ticker], queue: { maintenance: { enabled: false } } });
  const queue = () => ctx.app.get(QueueService);

  it('@RecurringJob: the method runs once per fire time, with its payload, _schedule and runAt = the fire time', async () => {
    await waitFor('three runs', async () => runs.filter((r) => r.queue === 'every-second').length >= 3, 10_000);
    const mine = runs.filter((r) => r.queue === 'every-second');
    expect(new Set(mine.map((r) => r.fireAt)).size).toBe(mine.length);
    for (const r of mine) {
      expect(r.runAt).toBe(r.fireAt);
      expect(r.payload).toEqual({ greeting: 'hi', _schedule: { name: 'every-second', fireAt: r.fireAt } });
      expect(new Date(r.fireAt).getMilliseconds()).toBe(0);
    }
    const { rows } = await ctx.db.query(`SELECT max_attempts FROM background_jobs WHERE queue_name = 'every-second' LIMIT 1`);
    expect(rows[0].max_attempts).toBe(2);
    const [info] = await queue().schedules();
    expect(info).toMatchObject({ name: 'every-second', queue: 'every-second', cron: '* * * * * *', timeZone: 'UTC', source: 'code', paused: false, orphaned: false, missedFires: 'skip' });
    expect(info.nextFireAt!.getTime()).toBeGreaterThan(info.lastFireAt!.getTime());
  });

  it('runtime API: upsert, list with next fire, pause (no fires), resume, update, remove', async () => {
    const q = queue();
    const created = await q.upsertSchedule({ name: 'nightly', cron: '0 3 * * *', queue: 'runtime-target', timeZone: 'Europe/Berlin', payload: { kind: 'report' } });
    expect(created).toMatchObject({ name: 'nightly', queue: 'runtime-target', source: 'runtime', paused: false, lastFireAt: null });
    const { rows: [clock] } = await ctx.db.query(`SELECT now() AS now`);
    expect(created.nextFireAt!.getTime()).toBeGreaterThan(clock.now.getTime());
    // 03:00 in Berlin is 01:00 or 02:00 UTC.
    expect([1, 2]).toContain(created.nextFireAt!.getUTCHours());

    // Same cron, new payload: the next fire stays; a new cron recomputes it.
    const samePlan = await q.upsertSchedule({ name: 'nightly', cron: '0 3 * * *', queue: 'runtime-target', timeZone: 'Europe/Berlin', payload: { kind: 'full' } });
    expect(samePlan.nextFireAt).toEqual(created.nextFireAt);
    expect(samePlan.payload).toEqual({ kind: 'full' });

    const before = runs.filter((r) => r.queue === 'runtime-target').length;
    await q.upsertSchedule({ name: 'nightly', cron: '* * * * * *', queue: 'runtime-target' });
    await waitFor('a runtime fire', async () => runs.filter((r) => r.queue === 'runtime-target').length > before, 5_000);

    expect(await q.pauseSchedule('nightly')).toBe(true);
    await new Promise((r) => setTimeout(r, 300)); // a fire claimed just before the pause may still run
    const paused = runs.filter((r) => r.queue === 'runtime-target').length;
    await new Promise((r) => setTimeout(r, 2_200));
    expect(runs.filter((r) => r.queue === 'runtime-target').length).toBe(paused);
    expect((await q.schedule('nightly'))!.paused).toBe(true);

    expect(await q.resumeSchedule('nightly')).toBe(true);
    const resumed = (await q.schedule('nightly'))!;
    const { rows: [clock2] } = await ctx.db.query(`SELECT now() AS now`);
    // Resumed from the next fire after now: the fires of the pause are not caught up.
    expect(resumed.nextFireAt!.getTime()).toBeGreaterThan(clock2.now.getTime() - 1_000);
    await waitFor('a fire after resume', async () => runs.filter((r) => r.queue === 'runtime-target').length > paused, 5_000);

    expect(await q.removeSchedule('nightly')).toBe(true);
    expect(await q.removeSchedule('nightly')).toBe(false);
    expect(await q.schedule('nightly')).toBeNull();
    expect(await q.pauseSchedule('nightly')).toBe(false);
    expect(await q.resumeSchedule('nightly')).toBe(false);
  });

  it('bad runtime input fails at the call, naming the problem, with nothing stored', async () => {
    const q = queue();
    await expect(q.upsertSchedule({ name: 'bad', cron: '61 * * * *', queue: 'x' })).rejects.toThrow(/upsertSchedule\("bad"\): invalid cron "61 \* \* \* \*": .*61/);
    await expect(q.upsertSchedule({ name: 'bad', cron: '* * * * *', queue: 'x', timeZone: 'Mars/Olympus' })).rejects.toThrow(/unknown timeZone "Mars\/Olympus"/);
    await expect(q.upsertSchedule({ name: 'bad', cron: '* * * * *', queue: 'x', missedFires: 'all' as never })).rejects.toThrow(/invalid missedFires "all"/);
    await expect(q.upsertSchedule({ name: 'bad', cron: '* * * * *', queue: 'x', missedFires: { windowMs: -1 } })).rejects.toThrow(/invalid missedFires/);
    await expect(q.upsertSchedule({ name: 'bad', cron: '* * * * *', queue: 'x', payload: [1] as never })).rejects.toThrow(/expected a JSON object/);
    await expect(q.upsertSchedule({ name: 'bad', cron: '0 0 30 2 *', queue: 'x' })).rejects.toThrow(/invalid cron/);
    await expect(q.upsertSchedule({ name: 'bad', cron: '* * * * *', queue: 'x', interval: 5 } as never)).rejects.toThrow(/unknown option "interval"/);
    await expect(q.upsertSchedule({ name: 'bad name!', cron: '* * * * *', queue: 'x' })).rejects.toThrow(/invalid schedule name/);
    expect(await q.schedule('bad')).toBeNull();
  });

  // A time PostgreSQL computes has microseconds (a schedule written by SQL, a migration, now() + interval); the
  // scheduler reads milliseconds, and its compare-and-set once tested next_fire_at = the time read, so such a
  // schedule lost a race with nobody on every tick and never fired.
  it('a schedule written by SQL with microseconds in next_fire_at fires', async () => {
    await ctx.db.query(
      `INSERT INTO background_schedules (name, queue_name, cron, next_fire_at, source)
       VALUES ('sql-made', 'sql-made', '0 0 1 1 *', date_trunc('milliseconds', now()) - interval '1 second' + interval '123 microseconds', 'runtime')`,
    );
    const scheduler = ctx.app.get(RecurringScheduler);
    const fires = async () => (await ctx.db.query(`SELECT payload->'_schedule'->>'fireAt' AS fire_at FROM background_jobs WHERE queue_name = 'sql-made'`)).rows;
    await waitFor('the fire of the SQL-made schedule', async () => {
      await scheduler.runOnce();
      return (await fires()).length > 0;
    }, 5_000);
    expect(await fires()).toHaveLength(1);
    const info = (await queue().schedule('sql-made'))!;
    expect(info.lastFireAt).not.toBeNull();
    expect(info.nextFireAt!.getUTCMonth()).toBe(0); // moved on to 1 January next year
    expect(info.nextFireAt!.getTime()).toBeGreaterThan(Date.now());
    await queue().removeSchedule('sql-made');
  });

  it('missed fires after a downtime, per policy: skip drops them, latest runs the latest once, a window runs each within it', async () => {
    const q = queue();
    const scheduler = ctx.app.get(RecurringScheduler);
    const yearly = '0 0 1 1 *';
    // Every year is derived from the database's clock, which the scheduler plans against: fires missed since
    // 1 January two years ago (three of them, this year's included), the next one on 1 January next year.
    const { rows: [clock] } = await ctx.db.query<{ now: Date }>('SELECT now()');
    const year = clock.now.getUTCFullYear();
    const newYear = (y: number) => new Date(Date.UTC(y, 0, 1)).toISOString();
    // A window that reaches 30 days before this year's fire, whatever the day: this year's fire only.
    const sinceThisYearsFire = clock.now.getTime() - Date.UTC(year, 0, 1) + 30 * 86_400_000;
    const policies = { skip: 'skip', latest: 'latest', 'window-1': { windowMs: sinceThisYearsFire }, 'window-all': { windowMs: 1_500 * 86_400_000 } } as const;
    for (const [name, missedFires] of Object.entries(policies)) {
      await q.upsertSchedule({ name: `missed-${name}`, cron: yearly, queue: `missed-${name}`, missedFires });
    }
    // As if every instance had been down since before 1 January two years ago.
    await ctx.db.query(`UPDATE background_schedules SET next_fire_at = $1 WHERE name LIKE 'missed-%'`, [newYear(year - 2)]);
    await scheduler.runOnce();
    // This app's own timer may have claimed some of them first (then runOnce skipped them): wait for its commits.
    await waitFor('every schedule moved on', async () =>
      (await ctx.db.query(`SELECT 1 FROM background_schedules WHERE name LIKE 'missed-%' AND next_fire_at < $1`, [newYear(year + 1)])).rowCount === 0,
    );
    const { rows } = await ctx.db.query<{ queue_name: string; fire_at: string }>(
      `SELECT queue_name, payload->'_schedule'->>'fireAt' AS fire_at FROM background_jobs WHERE queue_name LIKE 'missed-%' ORDER BY queue_name, id`,
    );
    const fires = (queueName: string) => rows.filter((r) => r.queue_name === queueName).map((r) => r.fire_at);
    expect(fires('missed-skip')).toEqual([]);
    expect(fires('missed-latest')).toEqual([newYear(year)]);
    expect(fires('missed-window-1')).toEqual([newYear(year)]);
    expect(fires('missed-window-all')).toEqual([newYear(year - 2), newYear(year - 1), newYear(year)]);
    for (const name of Object.keys(policies)) {
      const info = (await q.schedule(`missed-${name}`))!;
      expect(info.nextFireAt!.toISOString()).toBe(newYear(year + 1));
      await q.removeSchedule(`missed-${name}`);
    }
    // A second tick finds nothing more to do.
    expect((await scheduler.runOnce()).jobs).toBeLessThanOrEqual(2); // only every-second's fires
  });
});

describe('boot sync of code schedules', () => {
  it('ten instances booting at once sync once; an unchanged schedule keeps its next fire, a changed cron recomputes it', async () => {
    const url = await createTestDatabase('recurringsync');
    const db = sqlPool(url);
    @Injectable()
    class Hourly {
      @RecurringJob('0 * * * *', { name: 'hourly-report' })
      async run() {}
    }
    const options = { providers: [Hourly], queue: { workers: false, maintenance: { enabled: false }, poolSize: 2 } };
    // Migrations first (their own test covers ten at once), then ten boots racing on the sync.
    await (await startApp(url, options)).close();
    await db.query(`DELETE FROM background_schedules`);
    const apps = await Promise.all(Array.from({ length: 10 }, () => startApp(url, options)));
    try {
      const { rows } = await db.query(`SELECT name, revision, next_fire_at, source FROM background_schedules`);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ name: 'hourly-report', revision: '1', source: 'code' });
      const next = rows[0].next_fire_at as Date;
      expect(next.getUTCMinutes()).toBe(0);

      const again = await startApp(url, options);
      await again.close();
      const { rows: kept } = await db.query(`SELECT revision, next_fire_at FROM background_schedules`);
      expect(kept[0]).toEqual({ revision: '1', next_fire_at: next });

      @Injectable()
      class EveryTenMinutes {
        @RecurringJob('5/10 * * * *', { name: 'hourly-report' })
        async run() {}
      }
      const changed = await startApp(url, { ...options, providers: [EveryTenMinutes] });
      await changed.close();
      const { rows: recomputed } = await db.query(`SELECT revision, next_fire_at, cron FROM background_schedules`);
      expect(recomputed[0].revision).toBe('2');
      expect(recomputed[0].cron).toBe('5/10 * * * *');
      expect((recomputed[0].next_fire_at as Date).getUTCMinutes() % 10).toBe(5);
    } finally {
      await Promise.all(apps.map((a) => a.close()));
      await db.end();
    }
  }, 60_000);

  it('a schedule removed from code stops firing once no running instance has declared it for orphanAfterMs', async () => {
    const url = await createTestDatabase('recurringorphan');
    const db = sqlPool(url);
    @Injectable()
    class Old {
      @RecurringJob('* * * * * *', { name: 'old-schedule' })
      async run() {}
    }
    const recurring = { orphanAfterMs: 3_000, pollIntervalMs: 100 };
    const oldApp = await startApp(url, { providers: [Old], queue: { workers: false, maintenance: { enabled: false }, recurring } });
    let newApp: INestApplicationContext | undefined;
    try {
      await waitFor('a fire', async () => (await db.query(`SELECT 1 FROM background_jobs`)).rowCount! > 0, 5_000);
      // The new version no longer declares it; while the old instance runs (a rolling deploy), it goes on firing.
      newApp = await startApp(url, { queue: { workers: false, maintenance: { enabled: false }, recurring } });
      await new Promise((r) => setTimeout(r, 3_500));
      const q = newApp.get(QueueService);
      expect((await q.schedule('old-schedule'))!.orphaned).toBe(false);
      await oldApp.close();
      const { rows: [{ n: firedBefore }] } = await db.query(`SELECT count(*)::int AS n FROM background_jobs`);
      await new Promise((r) => setTimeout(r, 4_500));
      const info = (await q.schedule('old-schedule'))!;
      expect(info.orphaned).toBe(true);
      const { rows: [{ n: firedAfter }] } = await db.query(`SELECT count(*)::int AS n FROM background_jobs`);
      // Fires up to orphanAfterMs after the old instance stopped, then none.
      expect(firedAfter - firedBefore).toBeLessThanOrEqual(4);
      await new Promise((r) => setTimeout(r, 1_500));
      expect((await db.query(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n).toBe(firedAfter);
    } finally {
      await oldApp.close();
      await newApp?.close();
      await db.end();
    }
  }, 30_000);

  it('with @JobHandler on the same method, the schedule fires into that queue; conflicting queue or handler options fail the boot', async () => {
    const url = await createTestDatabase('recurringboth');
    const db = sqlPool(url);
    const seen: string[] = [];
    @Injectable()
    class Both {
      @JobHandler('both-queue', { maxAttempts: 7 })
      @RecurringJob('* * * * * *', { name: 'both-schedule' })
      async run(job: Job<RecurringJobPayload>) {
        seen.push(job.payload._schedule.name);
      }
    }
    const app = await startApp(url, { providers: [Both], queue: { maintenance: { enabled: false } } });
    try {
      await waitFor('a run', async () => seen.length > 0, 5_000);
      expect(seen[0]).toBe('both-schedule');
      const { rows } = await db.query(`SELECT queue_name, max_attempts FROM background_jobs LIMIT 1`);
      expect(rows[0]).toEqual({ queue_name: 'both-queue', max_attempts: 7 });
    } finally {
      await app.close();
      await db.end();
    }
    @Injectable()
    class Mismatch {
      @JobHandler('one')
      @RecurringJob('* * * * *', { queue: 'two' })
      async run() {}
    }
    await expect(startApp(url, { providers: [Mismatch], queue: { workers: false } })).rejects.toThrow(/@RecurringJob on Mismatch\.run says queue "two" but its @JobHandler handles "one"/);
    @Injectable()
    class Twice {
      @JobHandler('one')
      @RecurringJob('* * * * *', { timeoutMs: 5 })
      async run() {}
    }
    await expect(startApp(url, { providers: [Twice], queue: { workers: false } })).rejects.toThrow(/@RecurringJob on Twice\.run has handler options \(timeoutMs\)/);
    @Injectable()
    class Dup {
      @RecurringJob('* * * * *', { name: 'same', queue: 'a' })
      async a() {}
      @RecurringJob('* * * * *', { name: 'same', queue: 'b' })
      async b() {}
    }
    await expect(startApp(url, { providers: [Dup], queue: { workers: false } })).rejects.toThrow(/Two @RecurringJob methods \(Dup\.a and Dup\.b\) declare the schedule "same"/);
  }, 30_000);

  it('connections killed under the scheduler: it logs, backs off, recovers; each fire still once, none lost', async () => {
    const url = await createTestDatabase('recurringkill');
    const db = sqlPool(url);
    @Injectable()
    class Steady {
      @RecurringJob('* * * * * *', { name: 'steady', missedFires: { windowMs: 60_000 } })
      async run() {}
    }
    const app = await startApp(url, { providers: [Steady], queue: { workers: false, maintenance: { enabled: false }, recurring: { pollIntervalMs: 100 } }, logLevels: [] });
    try {
      const from = (await db.query<{ now: Date }>('SELECT now()')).rows[0].now.getTime();
      let killed = 0;
      for (let i = 0; i < 60; i++) {
        await new Promise((r) => setTimeout(r, 50));
        // Every connection of the maintenance pool (the tick's), maybe inside a fire's transaction.
        const { rowCount } = await db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'nestjs-pg-queue maintenance'`);
        killed += rowCount ?? 0;
      }
      expect(killed).toBeGreaterThanOrEqual(3);
      const until = (await db.query<{ now: Date }>('SELECT now()')).rows[0].now.getTime();
      await waitFor('fires after the kills', async () => {
        const { rows } = await db.query(`SELECT 1 FROM background_jobs WHERE run_at > $1`, [new Date(until + 1_000)]);
        return rows.length > 0;
      }, 10_000);
      const { rows } = await db.query<{ fire_at: string; n: number }>(
        `SELECT payload->'_schedule'->>'fireAt' AS fire_at, count(*)::int AS n FROM background_jobs GROUP BY 1 ORDER BY 1`,
      );
      expect(rows.filter((r) => r.n !== 1)).toEqual([]);
      const times = rows.map((r) => new Date(r.fire_at).getTime());
      for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBe(1_000);
      expect(times[0]).toBeLessThanOrEqual(from + 1_000);
    } finally {
      await app.close();
      await db.end();
    }
  }, 30_000);

  it('with transactionPooler (unnamed statements only), runtime schedules fire the same', async () => {
    const url = await createTestDatabase('recurringpooler');
    const db = sqlPool(url);
    const app = await startApp(url, { queue: { transactionPooler: true, listenerUrl: url, workers: false, maintenance: { enabled: false } } });
    try {
      await app.get(QueueService).upsertSchedule({ name: 'pooled', cron: '* * * * * *', queue: 'pooled' });
      await waitFor('two fires', async () => (await db.query(`SELECT 1 FROM background_jobs WHERE queue_name = 'pooled'`)).rowCount! >= 2, 5_000);
      expect(await app.get(QueueService).pauseSchedule('pooled')).toBe(true);
      expect(await app.get(QueueService).resumeSchedule('pooled')).toBe(true);
    } finally {
      await app.close();
      await db.end();
    }
  }, 20_000);

  it('a bad cron, time zone or policy fails the boot, naming the method', async () => {
    const url = await createTestDatabase('recurringbad');
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['not a cron', {}, /@RecurringJob on BadSchedule\.run: invalid cron "not a cron"/],
      ['* * * * *', { timeZone: 'Europe/Atlantis' }, /@RecurringJob on BadSchedule\.run: unknown timeZone "Europe\/Atlantis"/],
      ['* * * * *', { missedFires: { window: 5 } }, /@RecurringJob on BadSchedule\.run: invalid missedFires/],
      ['* * * * *', { concurrency: 0 }, /@RecurringJob on BadSchedule\.run: Invalid @JobHandler\('BadSchedule\.run'\) option concurrency=0/],
    ];
    for (const [cron, options, message] of cases) {
      @Injectable()
      class BadSchedule {
        @RecurringJob(cron, options)
        async run() {}
      }
      await expect(startApp(url, { providers: [BadSchedule], queue: { workers: false, maintenance: { enabled: false } } })).rejects.toThrow(message);
    }
  }, 30_000);
});

describe('the compare-and-set that claims a fire', () => {
  // Racing instances in one process rarely reach it (SKIP LOCKED turns most losers away first), so only the 40 s
  // multi-process spec noticed a broken compare-and-set. Here a fire is claimed from a stale read, as an
  // instance that scanned before another one's claim committed does.
  it('refuses a fire planned from a stale read: the same fire again, or an older revision of the schedule', async () => {
    const url = await createTestDatabase('recurringcas');
    const db = sqlPool(url);
    const app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false }, recurring: { enabled: false } } });
    try {
      const store = app.get(ScheduleStore, { strict: false });
      const queue = app.get(QueueService);
      const scan = async () => (await store.dueSchedules(60_000, 10)).due.find((d) => d.name === 'cas')!;
      const insert = () => Promise.resolve();
      await queue.upsertSchedule({ name: 'cas', cron: '0 0 1 1 *', queue: 'cas' });
      await db.query(`UPDATE background_schedules SET next_fire_at = now() - interval '1 hour' WHERE name = 'cas'`);
      const read = await scan();
      expect(await store.claimFire(read, read.nextFireMs + 86_400_000, read.nextFireMs, 1, insert)).toBe(true);
      expect(await store.claimFire(read, read.nextFireMs + 86_400_000, read.nextFireMs, 1, insert)).toBe(false); // the same fire, again

      await db.query(`UPDATE background_schedules SET next_fire_at = now() - interval '1 hour' WHERE name = 'cas'`);
      const before = await scan();
      await queue.upsertSchedule({ name: 'cas', cron: '0 0 1 1 *', queue: 'cas', payload: { v: 2 } }); // same fire time, new revision
      expect(await store.claimFire(before, before.nextFireMs + 86_400_000, before.nextFireMs, 1, insert)).toBe(false);
      const after = await scan();
      expect(after.nextFireMs).toBe(before.nextFireMs);
      expect(await store.claimFire(after, after.nextFireMs + 86_400_000, after.nextFireMs, 1, insert)).toBe(true);
    } finally {
      await app.close();
      await db.end();
    }
  });
});

describe('due schedules that cannot be claimed', () => {
  // A scan that returned the scan limit (100) scanned again at once even when it claimed nothing, and got the same
  // rows for ever: every other schedule stopped firing and app.close() waited on the tick. The trigger here is
  // 100 stored crons the parser refuses (written by SQL), due before a good schedule.
  it('100 schedules that cannot fire do not wedge the tick: the others fire, each bad one is logged once, close() is prompt', async () => {
    const url = await createTestDatabase('recurringwedge');
    const db = sqlPool(url);
    const errors: string[] = [];
    const logger = { log: () => undefined, warn: () => undefined, error: (m: unknown) => void errors.push(String(m)), debug: () => undefined, verbose: () => undefined, fatal: () => undefined };
    const app = await startApp(url, { providers: [Ticker], queue: { workers: false, maintenance: { enabled: false }, recurring: { pollIntervalMs: 500 } }, logLevels: [] });
    app.useLogger(logger);
    const scans = jest.spyOn(ScheduleStore.prototype, 'dueSchedules');
    try {
      await db.query(
        `INSERT INTO background_schedules (name, queue_name, cron, next_fire_at, source)
         SELECT 'bad-' || lpad(i::text, 3, '0'), 'bad', '61 * * * *', now() - interval '1 hour' + i * interval '1 millisecond', 'runtime'
         FROM generate_series(1, 100) AS i`,
      );
      // The code schedule 'every-second' (due after every bad row) keeps firing.
      const fired = async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'every-second' AND created_at > now() - interval '1 second'`)).rows[0].n;
      await waitFor('every-second fires beside the bad schedules', async () => (await fired()) > 0, 5_000);

      // One tick pages past what it cannot claim: two scans for 101 due rows, not one per round for ever.
      scans.mockClear();
      const scheduler = app.get(RecurringScheduler);
      const tick = await Promise.race([scheduler.runOnce(), new Promise<'wedged'>((r) => setTimeout(() => r('wedged'), 5_000).unref())]);
      expect(tick).not.toBe('wedged');
      expect(scans.mock.calls.length).toBeLessThanOrEqual(3);

      const named = errors.filter((e) => /schedule "bad-\d{3}" cannot fire: .*61/.test(e));
      expect(new Set(named).size).toBe(100);
      expect(named).toHaveLength(100); // once each, however many ticks ran
    } finally {
      scans.mockRestore();
      const t0 = Date.now();
      const closed = await Promise.race([app.close().then(() => 'closed'), new Promise((r) => setTimeout(() => r('still closing'), 5_000).unref())]);
      expect([closed, Date.now() - t0 < 5_000]).toEqual(['closed', true]);
      await db.end();
    }
  });
});
