import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { HistoryStore } from '../src/store/history.store.js';
import { newPartitionRange, partitionSuffix } from '../src/store/history.sql.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// Issue 39 item 15: history.partitionWidth changed (day to hour, hour to day, day to week), or two widths at once
// during a rolling deploy. A new partition must fit around the ones other widths made, and the mover must go on
// moving. Every assertion reads the tables and the catalog (rows moved, partitions' bounds).

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const RETENTION = { completedMs: 60 * DAY, failedMs: 60 * DAY };

interface Bounds {
  name: string;
  kind: 'completed' | 'failed';
  lower: string;
  upper: string;
}

/** Every partition of history, with its bounds in UTC as ISO text, oldest first per kind. */
async function partitionBounds(db: pg.Pool): Promise<Bounds[]> {
  const { rows } = await db.query<Bounds>(`
    SELECT c.relname AS name, CASE WHEN p.relname = 'background_jobs_history_completed' THEN 'completed' ELSE 'failed' END AS kind,
      to_char(substring(pg_get_expr(c.relpartbound, c.oid) FROM $$FROM \\('([^']+)'\\)$$)::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"') AS lower,
      to_char(substring(pg_get_expr(c.relpartbound, c.oid) FROM $$TO \\('([^']+)'\\)$$)::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"') AS upper
    FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid JOIN pg_class AS p ON p.oid = i.inhparent
    WHERE p.relname IN ('background_jobs_history_completed', 'background_jobs_history_failed')
    ORDER BY 2, 3`);
  return rows;
}

/** No two partitions of a kind overlap (PostgreSQL refuses it; checked again from the bounds). */
function expectNoOverlap(bounds: Bounds[]): void {
  for (const kind of ['completed', 'failed'] as const) {
    const mine = bounds.filter((b) => b.kind === kind);
    for (let i = 1; i < mine.length; i++) expect(mine[i].lower >= mine[i - 1].upper).toBe(true);
  }
}

/** Finished jobs at `hours` after `base` (a timestamptz expression), `status` each. */
async function finishedJobs(db: pg.Pool, base: string, hours: number[], status = 'completed'): Promise<void> {
  await db.query(
    `INSERT INTO background_jobs (queue_name, payload, status, attempts, finished_at, last_error)
     SELECT 'work', jsonb_build_object('h', h), $2::background_job_status, 1, ${base} + h * interval '1 hour', CASE WHEN $2 <> 'completed' THEN 'boom' END
     FROM unnest($1::float8[]) AS h`,
    [hours, status],
  );
}

const hot = async (db: pg.Pool) => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n;
const moved = async (db: pg.Pool) => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs_history`)).rows[0].n;
/** The UTC instant, as ISO text to the minute, `hours` after the midnight (UTC) `days` before today. */
const at = async (db: pg.Pool, days: number, hours: number) =>
  (await db.query<{ t: string }>(
    `SELECT to_char(date_trunc('day', now(), 'UTC') AT TIME ZONE 'UTC' - $1 * interval '1 day' + $2 * interval '1 hour', 'YYYY-MM-DD"T"HH24:MI"Z"') AS t`,
    [days, hours],
  )).rows[0].t;

/** Moves until background_jobs is empty (or `rounds` batches); every error is collected. */
async function drain(store: HistoryStore, width: 'hour' | 'day' | 'week' | 'month', db: pg.Pool, errors: string[], rounds = 50): Promise<void> {
  for (let i = 0; i < rounds && (await hot(db)) > 0; i++) {
    try {
      await store.moveBatch(width, 0, 100, RETENTION);
    } catch (error) {
      errors.push((error as Error).message);
    }
  }
}

describe('history: partitions of different widths', () => {
  let url: string;
  let db: pg.Pool;

  beforeAll(async () => {
    url = await createTestDatabase('history_widths');
    db = sqlPool(url);
    // The schema only; the movers below are HistoryStores, one per "deploy".
    const schema = await startApp(url, { queue: { workers: false } });
    await schema.close();
  });
  afterAll(async () => {
    await db?.end();
  });

  it('day, then hour, then day again: new partitions fit around the old ones and every row moves', async () => {
    const base = `date_trunc('day', now(), 'UTC') - interval '5 days'`;
    // Deploy 1, width day: jobs of day -5 at 10:30 and 11:30.
    await finishedJobs(db, base, [10.5, 11.5]);
    await finishedJobs(db, base, [10.25], 'failed');
    const dayStore = new HistoryStore(db);
    const errors: string[] = [];
    await drain(dayStore, 'day', db, errors);
    expect(errors).toEqual([]);
    expect(await partitionBounds(db)).toEqual([
      { name: expect.stringMatching(/_completed_p\d{8}$/), kind: 'completed', lower: await at(db, 5, 0), upper: await at(db, 4, 0) },
      { name: expect.stringMatching(/_failed_p\d{8}$/), kind: 'failed', lower: await at(db, 5, 0), upper: await at(db, 4, 0) },
    ]);

    // Deploy 2, width hour: jobs inside the day partition (14:30 of day -5) go there; those of day -4 (05:30) get
    // an hour partition. Before the fix the hour partition of 14:00 overlapped the day one, and nothing moved.
    await finishedJobs(db, base, [14.5, 23.9, 24 + 5.5]);
    await finishedJobs(db, base, [14.5], 'failed');
    const hourPool = sqlPool(url);
    try {
      await drain(new HistoryStore(hourPool), 'hour', db, errors);
    } finally {
      await hourPool.end();
    }
    expect(errors).toEqual([]);
    expect(await hot(db)).toBe(0);
    expect(await moved(db)).toBe(7);
    expect((await partitionBounds(db)).filter((b) => b.kind === 'completed').map(({ lower, upper }) => [lower, upper])).toEqual([
      [await at(db, 5, 0), await at(db, 4, 0)],
      [await at(db, 4, 5), await at(db, 4, 6)],
    ]);

    // Deploy 3, width day again: 05:45 of day -4 goes into the hour partition; 08:30 gets a day partition that
    // starts where the hour one ends.
    await finishedJobs(db, base, [24 + 5.75, 24 + 8.5, 24 + 3.5]);
    await drain(new HistoryStore(db), 'day', db, errors);
    expect(errors).toEqual([]);
    expect(await hot(db)).toBe(0);
    const completed = (await partitionBounds(db)).filter((b) => b.kind === 'completed');
    expect(completed.map(({ lower, upper }) => [lower, upper])).toEqual([
      [await at(db, 5, 0), await at(db, 4, 0)],
      // 03:30 came after 05:00-06:00 was made: the day's range clipped to the hours before it.
      [await at(db, 4, 0), await at(db, 4, 5)],
      [await at(db, 4, 5), await at(db, 4, 6)],
      [await at(db, 4, 6), await at(db, 3, 0)],
    ]);
    expectNoOverlap(await partitionBounds(db));
    // Each row sits in the partition whose bounds hold its finish time.
    const { rows: [misplaced] } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM background_jobs_history AS h
       WHERE NOT h.finished_at <@ (SELECT tstzrange(substring(pg_get_expr(c.relpartbound, c.oid) FROM $$FROM \\('([^']+)'\\)$$)::timestamptz,
                                                   substring(pg_get_expr(c.relpartbound, c.oid) FROM $$TO \\('([^']+)'\\)$$)::timestamptz)
                                   FROM pg_class AS c WHERE c.oid = h.tableoid)`,
    );
    expect(misplaced.n).toBe(0);
  }, 60_000);

  it('day, then week: a Tuesday of a week whose Monday has a day partition (same name before the fix) still moves', async () => {
    // The Monday and Tuesday four weeks back, 10:00 UTC: its week partition ends 21 to 27 days ago whatever today's
    // weekday, clear of the days the other tests use (at most 12 days back). Two weeks back, it ended 7 to 13 days
    // ago, and on a Monday or Tuesday it held the days -12 to -8 of the tests below, whose rows then went into it
    // and made no partition of their own (the full suite run at 00:22 UTC on Monday 2026-12-07 failed both).
    const monday = `(date_trunc('week', now(), 'UTC') - interval '28 days')`;
    await db.query(`DELETE FROM background_jobs`);
    await finishedJobs(db, monday, [10]);
    const errors: string[] = [];
    await drain(new HistoryStore(db), 'day', db, errors);
    await finishedJobs(db, monday, [24 + 10, 6 * 24 + 10]);
    await drain(new HistoryStore(db), 'week', db, errors);
    expect(errors).toEqual([]);
    expect(await hot(db)).toBe(0);
    const week = (await db.query<{ monday: string; tuesday: string; next: string }>(
      `SELECT to_char(${monday} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"') AS monday,
              to_char(${monday} AT TIME ZONE 'UTC' + interval '1 day', 'YYYY-MM-DD"T"HH24:MI"Z"') AS tuesday,
              to_char(${monday} AT TIME ZONE 'UTC' + interval '7 days', 'YYYY-MM-DD"T"HH24:MI"Z"') AS next`,
    )).rows[0];
    const theWeek = (await partitionBounds(db)).filter((b) => b.kind === 'completed' && b.lower >= week.monday && b.upper <= week.next);
    expect(theWeek.map(({ lower, upper }) => [lower, upper])).toEqual([
      [week.monday, week.tuesday],
      [week.tuesday, week.next],
    ]);
    expectNoOverlap(await partitionBounds(db));
  }, 60_000);

  it('a rolling deploy: two instances moving with hour and day at once keep moving every row, partitions never overlap', async () => {
    await db.query(`DELETE FROM background_jobs`);
    // 2,000 jobs over the 48 hours of days -9 and -8, both kinds: neither width has a partition there yet.
    await db.query(`
      INSERT INTO background_jobs (queue_name, payload, status, attempts, finished_at, last_error)
      SELECT 'work', jsonb_build_object('n', g), s.status::background_job_status, 1,
             date_trunc('day', now(), 'UTC') - interval '9 days' + (g % 2880) * interval '1 minute' + interval '7 seconds', CASE WHEN s.status <> 'completed' THEN 'boom' END
      FROM generate_series(1, 2000) AS g
      CROSS JOIN LATERAL (SELECT (ARRAY['completed', 'failed'])[1 + g % 2] AS status) AS s`);
    const before = await moved(db);
    const pools = [sqlPool(url), sqlPool(url)];
    const errors: string[] = [];
    try {
      await Promise.all([
        drain(new HistoryStore(pools[0]), 'hour', db, errors, 200),
        drain(new HistoryStore(pools[1]), 'day', db, errors, 200),
      ]);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
    expect(errors).toEqual([]);
    expect(await hot(db)).toBe(0);
    expect((await moved(db)) - before).toBe(2_000);
    const bounds = await partitionBounds(db);
    expectNoOverlap(bounds);
    // Days -9 and -8 are covered without a gap per kind, by partitions of either width.
    const from = await at(db, 9, 0);
    const to = await at(db, 7, 0);
    for (const kind of ['completed', 'failed'] as const) {
      const span = bounds.filter((b) => b.kind === kind && b.lower >= from && b.upper <= to);
      expect(span[0].lower).toBe(from);
      for (let i = 1; i < span.length; i++) expect(span[i].lower).toBe(span[i - 1].upper);
    }
  }, 120_000);

  it('an app whose partitionWidth changed from day to hour goes on moving (the mover of the module)', async () => {
    await db.query(`DELETE FROM background_jobs`);
    const maintenance = (partitionWidth: 'day' | 'hour') => ({
      completedRetentionMs: 30 * DAY,
      failedRetentionMs: 30 * DAY,
      history: { partitionWidth, moveIntervalMs: 20, moveAfterMs: 0 },
    });
    const base = `date_trunc('day', now(), 'UTC') - interval '12 days'`;
    await finishedJobs(db, base, [1.5, 2.5]);
    const dayApp = await startApp(url, { queue: { workers: false, maintenance: maintenance('day') } });
    try {
      await waitFor('the day app moved its rows', async () => (await hot(db)) === 0);
    } finally {
      await dayApp.close();
    }
    await finishedJobs(db, base, [3.5, 4.5, 30.5]);
    const hourApp = await startApp(url, { queue: { workers: false, maintenance: maintenance('hour') } });
    try {
      await waitFor('the hour app moved the rows of the day partition and of the next day', async () => (await hot(db)) === 0, 15_000);
    } finally {
      await hourApp.close();
    }
    const bounds = (await partitionBounds(db)).filter((b) => b.kind === 'completed');
    expect(bounds.map(({ lower, upper }) => [lower, upper])).toEqual(
      expect.arrayContaining([
        [await at(db, 12, 0), await at(db, 11, 0)],
        [await at(db, 11, 6), await at(db, 11, 7)],
      ]),
    );
    expectNoOverlap(await partitionBounds(db));
  }, 60_000);
});

describe('history: where a new partition goes (pure)', () => {
  const t = (iso: string) => Date.parse(iso);
  it('clips the width to the partitions around the row, and names each start once', () => {
    const day = { lower: t('2026-12-05T00:00:00Z'), upper: t('2026-12-06T00:00:00Z') };
    const hour = { lower: t('2026-12-06T10:00:00Z'), upper: t('2026-12-06T11:00:00Z') };
    expect(newPartitionRange(t('2026-12-06T12:30:00Z'), t('2026-12-06T00:00:00Z'), t('2026-12-07T00:00:00Z'), [day, hour])).toEqual({
      lower: t('2026-12-06T11:00:00Z'),
      upper: t('2026-12-07T00:00:00Z'),
    });
    expect(newPartitionRange(t('2026-12-06T08:30:00Z'), t('2026-12-06T00:00:00Z'), t('2026-12-07T00:00:00Z'), [day, hour])).toEqual({
      lower: t('2026-12-06T00:00:00Z'),
      upper: t('2026-12-06T10:00:00Z'),
    });
    expect(() => newPartitionRange(t('2026-12-05T08:30:00Z'), t('2026-12-05T08:00:00Z'), t('2026-12-05T09:00:00Z'), [day])).toThrow(/already holds/);
    expect(partitionSuffix('day', t('2026-12-06T00:00:00Z'))).toBe('20261206');
    expect(partitionSuffix('day', t('2026-12-06T11:00:00Z'))).toBe('20261206_11');
    expect(partitionSuffix('month', t('2026-12-01T00:00:00Z'))).toBe('202612');
    expect(partitionSuffix('month', t('2026-12-06T00:00:00Z'))).toBe('20261206_00');
    expect(partitionSuffix('week', t('2026-11-30T00:00:00Z'))).toBe('20261130');
    expect(partitionSuffix('hour', t('2026-12-06T00:00:00Z'))).toBe('20261206_00');
  });
});
