import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import type pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { startDashboardApp } from './dashboard/support/dashboard-app.js';
import { buildCli, runCli } from './support/run-cli.js';
import { sqlPool } from './support/test-app.js';

// Issue 39 item 16, the input edges: a run_at that does not exist (February 30) through the SQL functions and the
// CLI, and an id beyond int8 (or at its very end) in the dashboard's search. Every refusal is a clear one (22023,
// exit 2, an ordinary answer), never a data exception, a silently different date, or a 500.

describe('input edges', () => {
  let url: string;
  let db: pg.Pool;
  let dashboard: { app: INestApplication; baseUrl: string };
  const logs: string[] = [];
  const jobs = async (queue: string) => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = $1`, [queue])).rows[0].n;

  beforeAll(async () => {
    url = await createTestDatabase('input_edges');
    db = sqlPool(url);
    // Migrations, and the dashboard of the 500 (public: no auth hook needed for a test).
    dashboard = await startDashboardApp(url, { adapter: 'express', dashboard: { path: 'q', public: true }, queue: { workers: false }, handlers: false, logs });
  }, 120_000);
  afterAll(async () => {
    await dashboard?.app.close();
    await db?.end();
  });

  describe('a run_at that does not exist, from SQL: 22023 naming the option, nothing stored', () => {
    const message = (value: string) =>
      new RegExp(`^pg_queue_enqueue_many: job #0: Invalid pg_queue_enqueue\\("sql_dates"\\) option run_at="${value.replace(/[+.]/g, '\\$&')}": not a date-time that exists \\(.+\\); expected a real date-time`);
    it.each([
      ['2026-02-30T08:00:00Z'],
      ['2026-04-31T00:00:00Z'],
      ['2025-02-29T12:00:00+01:00'],
      ['2026-12-01T25:00:00Z'],
      ['2026-12-01T08:61:00Z'],
      ['2026-13-01T08:00:00Z'],
      ['2026-12-01T08:00:00+20:00'],
    ])('%s', async (value) => {
      const call = db.query(`SELECT * FROM pg_queue_enqueue_many($1::jsonb)`, [JSON.stringify([{ queue: 'sql_dates', payload: 1, run_at: value }])]);
      const error = (await call.then(() => null, (e: unknown) => e)) as { code?: string; message?: string } | null;
      expect({ code: error?.code, message: error?.message }).toEqual({ code: '22023', message: expect.stringMatching(message(value)) });
      expect(await jobs('sql_dates')).toBe(0);
    });

    it('a real leap day, the last day of a month and the largest instant still enqueue', async () => {
      const { rows } = await db.query<{ id: string }>(`SELECT id::text FROM pg_queue_enqueue_many($1::jsonb)`, [
        JSON.stringify(['2028-02-29T08:00:00Z', '2026-04-30T23:59:59.999Z', '9999-12-31T23:59:59.999Z'].map((runAt) => ({ queue: 'sql_dates_ok', payload: 1, run_at: runAt }))),
      ]);
      expect(rows).toHaveLength(3);
      const stored = (await db.query<{ at: string }>(`SELECT to_char(run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at FROM background_jobs WHERE queue_name = 'sql_dates_ok' ORDER BY id`)).rows;
      expect(stored.map((r) => r.at)).toEqual(['2028-02-29T08:00:00.000Z', '2026-04-30T23:59:59.999Z', '9999-12-31T23:59:59.999Z']);
    });
  });

  describe('pg-queue enqueue --run-at', () => {
    const cli = (...args: string[]) => runCli(args, { DATABASE_URL: url, FORCE_COLOR: '0' });
    beforeAll(async () => {
      await buildCli();
    }, 180_000);

    it.each([
      ['2026-02-30T08:00:00Z', 'February 2026 has 28 days'],
      ['2024-02-30T08:00:00Z', 'February 2024 has 29 days'],
      ['2026-04-31', 'April 2026 has 30 days'],
      ['2026-12-01T24:30:00Z', 'hours go from 00 to 23, minutes and seconds from 00 to 59'],
      ['2026-00-10T08:00:00Z', 'there is no month 0'],
    ])('refuses %s (exit 2, nothing stored)', async (value, why) => {
      const result = await cli('enqueue', 'cli_dates', '{}', '--run-at', value);
      expect({ code: result.code, stderr: result.stderr }).toEqual({
        code: 2,
        stderr: `pg-queue: --run-at ${JSON.stringify(value)} is not a date-time that exists (${why}): nothing was enqueued\n`,
      });
      expect(await jobs('cli_dates')).toBe(0);
    }, 60_000);

    it('refuses what is not ISO 8601, and stores the instant given when it exists', async () => {
      const bad = await cli('enqueue', 'cli_dates', '{}', '--run-at', 'next tuesday');
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/--run-at "next tuesday" is not a date-time: use ISO 8601/);
      const leap = await cli('enqueue', 'cli_dates', '{}', '--run-at', '2028-02-29T08:00:00Z');
      expect(leap).toMatchObject({ code: 0, stdout: expect.stringMatching(/^enqueued job \d+\n$/) });
      const id = /\d+/.exec(leap.stdout)![0];
      const { rows } = await db.query<{ at: string }>(`SELECT to_char(run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS at FROM background_jobs WHERE id = $1`, [id]);
      expect(rows[0].at).toBe('2028-02-29T08:00:00Z');
    }, 60_000);
  });

  describe("the dashboard's search and ids at and past the end of int8", () => {
    const get = async (path: string) => {
      const response = await fetch(`${dashboard.baseUrl}/q${path}`);
      return { status: response.status, body: await response.text() };
    };

    it('q=9223372036854775807 (the largest int8) and past it: an ordinary empty result, never a 500', async () => {
      const { rows: [{ id }] } = await db.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, payload) VALUES ('searched', '{}') RETURNING id::text`);
      for (const q of ['9223372036854775807', '9223372036854775806', '9223372036854775808', '9999999999999999999', '99999999999999999999']) {
        const answer = await get(`/jobs?q=${q}`);
        expect({ q, status: answer.status }).toEqual({ q, status: 200 });
        expect(answer.body).not.toContain(`/jobs/${id}"`);
      }
      // An id that exists is still found by the search.
      const found = await get(`/jobs?q=${id}`);
      expect(found.status).toBe(200);
      expect(found.body).toContain(`jobs/${id}`);
    });

    it('every id-like parameter at and past int8: 200, 400 or 404, never 500', async () => {
      const paths = [
        '/jobs?before=9223372036854775807', '/jobs?before=9223372036854775808',
        '/jobs/9223372036854775807', '/jobs/9223372036854775808',
        '/flows?before=9223372036854775807', '/flows?before=9223372036854775808',
        '/flows/9223372036854775807', '/flows/9223372036854775808',
        '/flows/1?after=9223372036854775807', '/flows/1?after=9223372036854775808',
        '/jobs?text=9223372036854775808', '/jobs?queue=9223372036854775808',
      ];
      const answers = await Promise.all(paths.map(async (path) => [path, (await get(path)).status] as const));
      expect(answers.filter(([, status]) => ![200, 400, 404].includes(status))).toEqual([]);
    });
  });
});
