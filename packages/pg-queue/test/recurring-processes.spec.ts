import { describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import type { MissedFires } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import type { RecurringWorkerConfig } from './recurring/recurring-worker.js';
import { dbNow, useRecurringProcesses } from './recurring/recurring-processes.js';
import { sqlPool } from './support/test-app.js';

// Recurring jobs across OS processes (issue 8): each fire time enqueued exactly once by whichever instance
// wins its compare-and-set, with instances SIGKILLed and restarted meanwhile; and a downtime of every
// instance under each missed-fire policy. Assertions read background_jobs.

const FULL = process.env.PG_QUEUE_FAULTS_FULL === '1';
const RUN_MS = 20_000;
const DOWNTIME_MS = FULL ? 10_000 : 4_000;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('recurring jobs across OS processes', () => {
  const { spawn, start, kill } = useRecurringProcesses();

  /** Fire times (epoch ms) of the jobs of a queue, and how many jobs each has. */
  async function fires(db: pg.Pool, queue: string): Promise<Map<number, number>> {
    const { rows } = await db.query<{ fire_at: string; n: number }>(
      `SELECT payload->'_schedule'->>'fireAt' AS fire_at, count(*)::int AS n FROM background_jobs WHERE queue_name = $1 GROUP BY 1`,
      [queue],
    );
    return new Map(rows.map((r) => [new Date(r.fire_at).getTime(), r.n]));
  }

  it(`4 processes, a schedule every second for ${RUN_MS / 1000} s, with SIGKILLs and restarts: one job per fire time, none missing`, async () => {
    const url = await createTestDatabase('recurringprocs');
    const db = sqlPool(url);
    const config: RecurringWorkerConfig = { url, schedules: { 'each-second': { windowMs: 60_000 }, 'each-second-skip': 'skip' } };
    try {
      // The first boots one after another (the first one migrates), the rest at once.
      let running = [await start(spawn(), config)];
      running.push(...(await Promise.all([spawn(), spawn(), spawn()].map((i) => start(i, config)))));
      const from = await dbNow(db);
      let spare = spawn();
      const kills: number[] = [];
      const starting: Promise<unknown>[] = [];
      let alive = running.length;
      while ((await dbNow(db)) < from + RUN_MS) {
        await sleep(2_500);
        // SIGKILL one instance mid-flight (maybe inside its claim transaction), keeping two or more up, and
        // start a fresh one without waiting for it (on a loaded machine a boot takes seconds).
        if (running.length >= 3) {
          const victim = running[Math.floor(Math.random() * running.length)];
          await kill(victim);
          kills.push(await dbNow(db));
          running = running.filter((c) => c !== victim);
          alive -= 1;
        }
        if (alive < 4) {
          alive += 1;
          starting.push(start(spare, config).then((child) => running.push(child)));
          spare = spawn();
        }
      }
      const until = await dbNow(db);
      await Promise.allSettled(starting);
      await Promise.all(running.map(kill));
      await kill(spare.child);

      const byFire = await fires(db, 'each-second');
      const times = [...byFire.keys()].sort((a, b) => a - b);
      // Exactly one job per fire time, and every second from the first fire to the last: none missing.
      expect([...byFire].filter(([, n]) => n !== 1)).toEqual([]);
      for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBe(1_000);
      expect(times[0]).toBeLessThanOrEqual(from + 1_000);
      expect(times[times.length - 1]).toBeGreaterThanOrEqual(until - 2_000);
      // Kills wait for three instances to be up; on a loaded machine restarts take seconds, so fewer happen.
      expect(kills.length).toBeGreaterThanOrEqual(2);
      // The skip schedule: never twice (a late fire may be skipped, never duplicated).
      expect([...(await fires(db, 'each-second-skip'))].filter(([, n]) => n !== 1)).toEqual([]);
      const { rows: byInstance } = await db.query(`SELECT count(DISTINCT locked_by)::int AS n FROM background_jobs WHERE queue_name = 'each-second'`);
      console.log(`recurring across processes: ${times.length} fire times over ${((until - from) / 1000).toFixed(1)} s, ${kills.length} SIGKILLs with restarts, ${byInstance[0].n} instances ran them; 0 duplicated, 0 missing`);
      // The schedule row agrees: its last fire is the latest job's.
      const { rows } = await db.query(`SELECT last_fire_at FROM background_schedules WHERE name = 'each-second'`);
      expect((rows[0].last_fire_at as Date).getTime()).toBe(times[times.length - 1]);
    } finally {
      await db.end();
    }
  }, 90_000);

  it(`a downtime of every instance (${DOWNTIME_MS / 1000} s) under each missed-fire policy`, async () => {
    const url = await createTestDatabase('recurringdown');
    const db = sqlPool(url);
    const schedules: Record<string, MissedFires> = { 'down-skip': 'skip', 'down-latest': 'latest', 'down-window': { windowMs: 60_000 } };
    const config: RecurringWorkerConfig = { url, schedules };
    try {
      const first = [await start(spawn(), config)];
      first.push(await start(spawn(), config));
      const restart = [spawn(), spawn()]; // loaded during the first run, started after the downtime
      await sleep(3_000);
      await Promise.all(first.map(kill));
      const down = await dbNow(db);
      await restart[0].loaded;
      await restart[1].loaded;
      await sleep(Math.max(0, down + DOWNTIME_MS - (await dbNow(db))));
      const up = await dbNow(db); // no instance ticks between down and up
      await Promise.all(restart.map((i) => start(i, config)));
      await sleep(3_000);
      await Promise.all(restart.map((i) => kill(i.child)));

      // Fire times strictly inside the downtime, with a second of margin on each side.
      const missed: number[] = [];
      for (let t = Math.ceil((down + 1_000) / 1_000) * 1_000; t <= up - 1_000; t += 1_000) missed.push(t);
      expect(missed.length).toBeGreaterThanOrEqual(DOWNTIME_MS / 1_000 - 2);
      const summary: string[] = [];
      for (const name of Object.keys(schedules)) {
        const byFire = await fires(db, name);
        expect([...byFire].filter(([, n]) => n !== 1)).toEqual([]);
        const times = [...byFire.keys()].sort((a, b) => a - b);
        const caughtUp = missed.filter((t) => byFire.has(t));
        summary.push(`${name}: ${caughtUp.length} of ${missed.length} caught up`);
        if (name === 'down-window') {
          // Every fire of the downtime was enqueued on restart, once: no gap from the first fire to the last.
          expect(caughtUp).toEqual(missed);
          for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBe(1_000);
        } else {
          // skip, and latest (for a schedule this frequent the latest due fire is on time: that is the one run).
          expect(caughtUp).toEqual([]);
          expect(Math.max(...times)).toBeGreaterThanOrEqual(up); // it fires again after the restart
        }
      }
      console.log(`recurring downtime of ${((up - down) / 1000).toFixed(1)} s: ${summary.join('; ')}`);
    } finally {
      await db.end();
    }
  }, 60_000);
});
