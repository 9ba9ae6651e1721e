import { describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import type { RecurringJobOptions } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import type { RecurringWorkerConfig } from './recurring/recurring-worker.js';
import { dbNow, useRecurringProcesses } from './recurring/recurring-processes.js';
import { sqlPool, startApp } from './support/test-app.js';

// `every`, `limit` and `startDate` / `endDate` across three OS processes (issue 43), as recurring-processes.spec.ts
// tests cron fires: every process declares the same schedules with @RecurringJob; one is SIGKILLed (maybe inside its
// claim's transaction) and replaced every 2.5 s. What each schedule promises is read back from background_jobs and
// background_schedules: an `every` schedule's fires are at least its interval apart by the database clock (so never
// two in one interval) and none is lost; a limit is never passed; no fire falls outside the dates.

const RUN_MS = 20_000;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface FireRow {
  fireAt: number;
  createdAt: number;
}

describe('every, limit and dates across OS processes', () => {
  const { spawn, start, kill } = useRecurringProcesses();

  /** Each job a schedule fired (into the queue of its name): its fire time and when its row was inserted (database clock). */
  async function fires(db: pg.Pool, queue: string): Promise<FireRow[]> {
    const { rows } = await db.query<{ fire_at: string; created_at: Date }>(
      `SELECT payload->'_schedule'->>'fireAt' AS fire_at, created_at FROM background_jobs WHERE queue_name = $1 ORDER BY 1`,
      [queue],
    );
    return rows.map((r) => ({ fireAt: new Date(r.fire_at).getTime(), createdAt: r.created_at.getTime() }));
  }

  const gaps = (rows: FireRow[]) => rows.slice(1).map((r, i) => r.fireAt - rows[i].fireAt);

  it(`3 processes for ${RUN_MS / 1000} s with SIGKILLs and restarts: every fires once per interval, limits hold, dates hold`, async () => {
    const url = await createTestDatabase('recurringeveryprocs');
    const db = sqlPool(url);
    try {
      // The schema first (a first boot that migrates takes seconds on a loaded machine), then the dates.
      await (await startApp(url, { queue: { workers: false, maintenance: { enabled: false }, recurring: { enabled: false } } })).close();
      // Dates from the database clock, the same text in every process (a code schedule's definition).
      const t0 = Math.ceil((await dbNow(db)) / 1_000) * 1_000;
      const at = (ms: number) => new Date(t0 + ms).toISOString();
      const decorated: Record<string, RecurringJobOptions> = {
        'every-1s': { every: 1_000 },
        'every-limit': { every: 1_000, limit: 6 },
        'every-window': { every: 1_000, startDate: at(8_000), endDate: at(14_000) },
        'cron-limit': { cron: '* * * * * *', limit: 5, startDate: at(9_000), missedFires: { windowMs: 60_000 } },
      };
      const config: RecurringWorkerConfig = { url, schedules: {}, decorated };
      let running = [await start(spawn(), config)];
      running.push(...(await Promise.all([spawn(), spawn()].map((i) => start(i, config)))));
      const from = await dbNow(db);
      let spare = spawn();
      const kills: number[] = [];
      const starting: Promise<unknown>[] = [];
      let alive = running.length;
      while ((await dbNow(db)) < from + RUN_MS) {
        await sleep(2_500);
        if (running.length >= 3) {
          const victim = running[Math.floor(Math.random() * running.length)];
          await kill(victim);
          kills.push(await dbNow(db));
          running = running.filter((c) => c !== victim);
          alive -= 1;
        }
        if (alive < 3) {
          alive += 1;
          starting.push(start(spare, config).then((child) => running.push(child)));
          spare = spawn();
        }
      }
      const until = await dbNow(db);
      await Promise.allSettled(starting);
      await Promise.all(running.map(kill));
      await kill(spare.child);
      expect(kills.length).toBeGreaterThanOrEqual(2);

      const { rows: scheduleRows } = await db.query<{ name: string; fires: number; fire_limit: number | null; next_fire_at: Date | null; last_fire_at: Date | null }>(
        `SELECT name, fires::int, fire_limit::int, next_fire_at, last_fire_at FROM background_schedules ORDER BY name`,
      );
      const schedule = (name: string) => scheduleRows.find((r) => r.name === name)!;
      const summary: string[] = [];
      for (const name of Object.keys(decorated)) {
        const got = await fires(db, name);
        // The row's count and last fire are the jobs': no claim counted without its job, no job without its claim.
        expect([name, schedule(name).fires]).toEqual([name, got.length]);
        expect([name, schedule(name).last_fire_at?.getTime()]).toEqual([name, got.at(-1)?.fireAt]);
        // No fire before its time by the database clock; an every schedule's fire time is its claim's database clock
        // itself (the job was inserted in the same transaction, at that moment).
        expect(got.filter((f) => f.createdAt < f.fireAt || (decorated[name].every !== undefined && f.createdAt - f.fireAt >= 1))).toEqual([]);
        summary.push(`${name}: ${got.length} fires, gaps ${gaps(got).length ? `${Math.min(...gaps(got))}-${Math.max(...gaps(got))} ms` : 'none'}`);
      }

      // every 1 s: never two fires closer than the interval (so never two in one interval), and none lost: each
      // next fire came within the interval plus a scan or two (a claim that died with its process is taken over by the
      // next scan, pollIntervalMs 200 ms).
      const steady = await fires(db, 'every-1s');
      const steadyGaps = gaps(steady);
      expect(steadyGaps.filter((g) => g < 1_000)).toEqual([]);
      expect(steadyGaps.filter((g) => g > 3_000)).toEqual([]);
      expect(steady.length).toBeGreaterThanOrEqual(Math.floor((until - from) / 1_500));
      expect(schedule('every-1s').next_fire_at).not.toBeNull();

      // The limit: exactly that many fires, then ended (next fire NULL), whatever instance was killed meanwhile.
      const limited = await fires(db, 'every-limit');
      expect(limited).toHaveLength(6);
      expect(gaps(limited).filter((g) => g < 1_000)).toEqual([]);
      expect(schedule('every-limit')).toMatchObject({ fires: 6, fire_limit: 6, next_fire_at: null });

      // The dates: none before the start, none after the end; in between, what every-1s is held to above: never two
      // fires closer than the interval, none lost (each next fire within 3 s, from the start, or from when the
      // processes were up if their start on a loaded machine ran past it, to the end). So 2 fires in its 6 s can be
      // right (at 8 s, 11 s, then 14 s passed while a SIGKILLed claim waited for the next scan: round 14e).
      const windowed = await fires(db, 'every-window');
      expect(windowed.filter((f) => f.fireAt < t0 + 8_000 || f.fireAt > t0 + 14_000)).toEqual([]);
      expect(windowed.length).toBeLessThanOrEqual(7);
      expect(gaps(windowed).filter((g) => g < 1_000 || g > 3_000)).toEqual([]);
      const windowFrom = Math.max(t0 + 8_000, from);
      if (windowFrom < t0 + 14_000 - 3_000) {
        expect(windowed.length).toBeGreaterThanOrEqual(2);
        expect(windowed[0].fireAt - windowFrom).toBeLessThanOrEqual(3_000);
        expect(t0 + 14_000 - windowed.at(-1)!.fireAt).toBeLessThanOrEqual(3_000);
      }
      expect(schedule('every-window').next_fire_at).toBeNull();

      // cron with a start and a limit: exactly the 5 fire times from the start, each once.
      expect((await fires(db, 'cron-limit')).map((f) => f.fireAt - t0)).toEqual([9_000, 10_000, 11_000, 12_000, 13_000]);
      expect(schedule('cron-limit')).toMatchObject({ fires: 5, next_fire_at: null });
      console.log(`every across processes over ${((until - from) / 1000).toFixed(1)} s, ${kills.length} SIGKILLs with restarts: ${summary.join('; ')}`);
    } finally {
      await db.end();
    }
  }, 120_000);
});
