import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { formatSpan } from '../../src/dashboard/views/format.js';
import { ADMIN_USERS, findChromium, openPage, openViewers } from './support/browser.js';
import { startDashboardApp } from './support/dashboard-app.js';
import { measure } from './support/layout-checks.js';
import { sqlPool } from '../support/test-app.js';

// Issue 44: a page per queue, as Oban Web and River UI have: its counts (live), throughput, wait (due to start) and
// run time percentiles over the last hour and day as charts with axes and units, its instances, pause and resume,
// and actions by filter that show their count before they ask. In headless Chromium against a real database; the
// figures are checked against SQL over the same rows, the actions against the rows they change.

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
const REFRESH_MS = 1_000;
const chromiumPath = findChromium();
const describeInBrowser = chromiumPath ? describe : describe.skip;

describeInBrowser('the dashboard: a page per queue, in headless Chromium', () => {
  let db: pg.Pool;
  let server: { app: INestApplication; baseUrl: string };
  let browser: Browser;
  let desk: BrowserContext;
  let phone: BrowserContext;
  let dash: string;

  const open = (context: BrowserContext, path: string): Promise<Page> => openPage(context, `${dash}${path}`);
  const count = async (sql: string) => (await db.query<{ n: number }>(sql)).rows[0].n;

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const url = await createTestDatabase('dashqueue');
    db = sqlPool(url);
    server = await startDashboardApp(url, {
      adapter: 'express',
      dashboard: { path: 'admin/queues', auth: dashboardBasicAuth({ users: ADMIN_USERS }), csrfSecret: 'queue-page-secret-0123456789abcdef0123', refreshMs: REFRESH_MS },
      queue: { leaseMs: 3_000, heartbeatMs: 300 },
    });
    dash = `${server.baseUrl}/admin/queues`;
    // Queue 'billing' has no handler. In the last hour: 30 completed jobs, job g waited g s from due to start and ran
    // 2g s; over the day, 40 more, one every half hour, each waited 1 s and ran 5 min; 3 failed; 5 due and 2 scheduled.
    await db.query(`INSERT INTO background_jobs (queue_name, payload, status, attempts, run_at, locked_at, finished_at)
      SELECT 'billing', jsonb_build_object('n', g), 'completed', 1, now() - interval '50 minutes' + g * interval '1 minute' - (3 * g) * interval '1 second',
             now() - interval '50 minutes' + g * interval '1 minute' - (2 * g) * interval '1 second', now() - interval '50 minutes' + g * interval '1 minute'
      FROM generate_series(1, 30) AS g`);
    await db.query(`INSERT INTO background_jobs (queue_name, payload, status, attempts, run_at, locked_at, finished_at)
      SELECT 'billing', jsonb_build_object('day', g), 'completed', 1, now() - g * interval '30 minutes' - interval '301 seconds',
             now() - g * interval '30 minutes' - interval '300 seconds', now() - g * interval '30 minutes'
      FROM generate_series(3, 42) AS g`);
    await db.query(`INSERT INTO background_jobs (queue_name, payload, status, attempts, max_attempts, run_at, locked_at, finished_at, last_error)
      SELECT 'billing', jsonb_build_object('failed', g), 'failed', 3, 3, now() - interval '10 minutes', now() - interval '9 minutes', now() - interval '8 minutes', 'Error: card declined'
      FROM generate_series(1, 3) AS g`);
    await db.query(`INSERT INTO background_jobs (queue_name, payload, run_at) SELECT 'billing', jsonb_build_object('due', g), now() - interval '1 minute' FROM generate_series(1, 5) AS g`);
    await db.query(`INSERT INTO background_jobs (queue_name, payload, run_at) SELECT 'billing', jsonb_build_object('later', g), now() + interval '2 hours' FROM generate_series(1, 2) AS g`);
    ({ browser, desk, phone } = await openViewers(chromiumPath!));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.app.close();
    await db?.end();
  });

  it('opens from the overview and shows the counts the table holds, kept live without a reload', async () => {
    const page = await open(desk, '');
    await Promise.all([page.waitForURL(/\/queues\/billing$/), page.locator('[data-queue-link="billing"]').click()]);
    await page.evaluate(() => ((globalThis as unknown as { stayed: boolean }).stayed = true));
    const shown = async (status: string) => page.locator(`[data-field="counts"] [data-count="billing|${status}"]`).innerText();
    expect({ due: await shown('due'), scheduled: await shown('scheduled'), completed: await shown('completed'), failed: await shown('failed') }).toEqual({
      due: String(await count(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'billing' AND status = 'queued' AND run_at <= now()`)),
      scheduled: '2',
      completed: '70',
      failed: '3',
    });
    await db.query(`INSERT INTO background_jobs (queue_name, payload) SELECT 'billing', '{}' FROM generate_series(1, 4)`);
    await page.locator('[data-field="counts"] [data-count="billing|due"]').getByText('9', { exact: true }).waitFor({ timeout: 10_000 });
    await expect(page.evaluate(() => (globalThis as unknown as { stayed?: boolean }).stayed)).resolves.toBe(true);
    await expect(page.locator('button[data-live-toggle]').isVisible()).resolves.toBe(true);
    // The place the runtime limits' form will take, on this page.
    await expect(page.locator('#limits[data-slot="limits"]').count()).resolves.toBe(1);
    await page.close();
  });

  it('draws the last hour and day with axes and units, from the same rows SQL reads', async () => {
    const page = await open(desk, '/queues/billing');
    const hour = page.locator('[data-field="charts-hour"]');
    const day = page.locator('[data-field="charts-day"]');
    await expect(hour.locator('.x-axis').first().innerText()).resolves.toMatch(/60 min ago\s+30 min ago\s+now/);
    await expect(day.locator('.x-axis').first().innerText()).resolves.toMatch(/24 h ago\s+12 h ago\s+now/);
    // Throughput: 33 jobs in the last hour (30 completed, 3 failed); the y axis counts jobs per bucket.
    await expect(hour.locator('figcaption').first().innerText()).resolves.toMatch(/^throughput: 30 completed · 3 failed · peak \d+\/5 min$/);
    await expect(hour.locator('.y-axis').first().innerText()).resolves.toMatch(/^\d+\/5 min\s+0$/);
    await expect(day.locator('figcaption').first().innerText()).resolves.toMatch(/^throughput: 70 completed · 3 failed · peak \d+\/hour$/);
    // Wait and run: the y axis's top is the largest p95 of a bucket, in its unit, as percentile_cont over the rows finds it.
    const top = async (span: 'hour' | 'day', column: string) =>
      (await db.query<{ ms: number }>(`SELECT max(p)::float8 AS ms FROM (
         SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY ${column}) AS p FROM (
           SELECT floor(extract(epoch FROM now() - finished_at) / ${span === 'hour' ? 300 : 3600}) AS b, extract(epoch FROM locked_at - run_at) * 1000 AS wait, extract(epoch FROM finished_at - locked_at) * 1000 AS run
           FROM background_jobs WHERE queue_name = 'billing' AND status IN ('completed', 'failed') AND finished_at >= now() - interval '${span === 'hour' ? '1 hour' : '24 hours'}') AS x GROUP BY b) AS y`)).rows[0].ms;
    const yTop = (where: typeof hour, n: number) => where.locator('.y-axis').nth(n).locator('span').first().innerText();
    await expect(yTop(hour, 1)).resolves.toBe(formatSpan(await top('hour', 'wait')));
    await expect(yTop(hour, 2)).resolves.toBe(formatSpan(await top('hour', 'run')));
    await expect(yTop(day, 2)).resolves.toBe(formatSpan(await top('day', 'run')));
    expect(formatSpan(await top('day', 'run'))).toBe('5 min');
    await expect(hour.locator('figcaption').nth(1).innerText()).resolves.toContain('wait: p50 and p95 per 5 min');
    await expect(hour.locator('svg polyline.p50').count()).resolves.toBeGreaterThan(0);
    await page.screenshot({ path: `${ARTIFACTS}queue-desk.png`, fullPage: true });
    await page.close();
  });

  it('shows how many jobs an action by filter changes before it asks, then changes exactly those rows', async () => {
    const page = await open(desk, '/queues/billing');
    const failed = await count(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'billing' AND status = 'failed'`);
    expect(failed).toBe(3);
    const asked: string[] = [];
    page.on('dialog', (dialog) => {
      asked.push(dialog.message());
      void dialog.accept();
    });
    const retry = page.locator('[data-field="bulk"]').getByRole('button', { name: 'Retry 3 failed' });
    await Promise.all([page.waitForURL(/flash=/), retry.click()]);
    expect(asked).toEqual(['3 failed jobs now. Retry every failed job in queue billing, each with a fresh set of attempts?']);
    await expect(page.locator('.flash').innerText()).resolves.toContain('retry: 3 jobs changed.');
    expect(await count(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'billing' AND status = 'failed'`)).toBe(0);
    expect(await count(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'billing' AND status = 'queued' AND attempts = 0 AND payload ? 'failed'`)).toBe(3);
    // Back on the queue's page, which no longer offers a retry of failed jobs.
    expect(new URL(page.url()).pathname).toBe('/admin/queues/queues/billing');
    await expect(page.locator('[data-field="bulk"]').getByRole('button', { name: /failed/ }).count()).resolves.toBe(0);
    await page.close();
  });

  it('pauses and resumes the queue from its page, as background_queues records it', async () => {
    const page = await open(desk, '/queues/billing');
    page.on('dialog', (dialog) => void dialog.accept());
    await Promise.all([page.waitForURL(/flash=/), page.locator('[data-field="queue-state"]').getByRole('button', { name: 'Pause' }).click()]);
    await expect(page.locator('[data-field="queue-state"] .paused').innerText()).resolves.toBe('paused');
    expect((await db.query<{ paused: boolean }>(`SELECT paused FROM background_queues WHERE queue_name = 'billing'`)).rows[0].paused).toBe(true);
    await Promise.all([page.waitForNavigation(), page.locator('[data-field="queue-state"]').getByRole('button', { name: 'Resume' }).click()]);
    await expect(page.locator('.flash').innerText()).resolves.toBe('Queue billing resumed.');
    expect((await db.query<{ paused: boolean }>(`SELECT paused FROM background_queues WHERE queue_name = 'billing'`)).rows[0].paused).toBe(false);
    await page.close();
  });

  it('lists the instances that serve the queue', async () => {
    const page = await open(desk, '/queues/flaky');
    const rows = await page.locator('[data-field="instances"] tr[data-instance]').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-instance')));
    const live = (await db.query<{ id: string }>(`SELECT id FROM background_instances`)).rows.map((r) => r.id);
    expect(rows).toEqual(live);
    expect(rows).toHaveLength(1);
    await page.close();
  });

  for (const [screen, width] of [['desk', 1400], ['phone', 390]] as const) {
    it(`at ${width} px: nothing wider than the screen and no clipped text in tables`, async () => {
      const page = await open(screen === 'desk' ? desk : phone, '/queues/flaky');
      await page.goto(`${dash}/queues/billing`);
      const seen = await measure(page);
      expect({ width: seen.page, wide: seen.wide, clipped: seen.clipped }).toEqual({ width, wide: [], clipped: [] });
      await page.screenshot({ path: `${ARTIFACTS}queue-${screen}.png`, fullPage: true });
      await page.close();
    });
  }
});
