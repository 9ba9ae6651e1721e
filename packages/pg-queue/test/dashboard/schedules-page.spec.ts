import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { QueueService } from 'nestjs-pg-queue';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { cronInWords, everyInWords } from '../../src/dashboard/views/cron-words.js';
import { nextFireAfter } from '../../src/recurring/fire-times.js';
import { ADMIN_USERS, findChromium, openPage, openViewers } from './support/browser.js';
import { startDashboardApp } from './support/dashboard-app.js';
import { measure } from './support/layout-checks.js';
import { sqlPool } from '../support/test-app.js';

// Issue 44, the schedules page: the cron in words, the next fires, Fire now and Remove (asked first, confirmed in the
// tables), at 1400 px and 390 px, in headless Chromium against a real database.

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
const chromiumPath = findChromium();
const describeInBrowser = chromiumPath ? describe : describe.skip;

describe('cronInWords', () => {
  it.each([
    ['* * * * *', 'every minute'],
    ['*/15 * * * *', 'every 15 minutes'],
    ['5 * * * *', 'every hour at :05'],
    ['0 */6 * * *', 'every 6 hours, at minute 0'],
    ['30 2 * * *', 'every day at 02:30'],
    ['0 9 * * 1-5', 'on weekdays at 09:00'],
    ['0 9 * * MON-FRI', 'on weekdays at 09:00'],
    ['0 10 * * 0,6', 'on weekends at 10:00'],
    ['0 8 * * 1', 'on Monday at 08:00'],
    ['0 8 * * 1,3', 'on Monday, Wednesday at 08:00'],
    ['0 0 1 * *', 'on the 1st of every month at 00:00'],
    ['0 30 2 * * *', 'every day at 02:30'],
  ])('%s: %s', (cron, words) => expect(cronInWords(cron)).toBe(words));

  it.each(['0 0 1 1 *', '0 9-17 * * *', '*/5 9 * * *', '0 0 L * *', 'not a cron'])('%s: none (the expression alone)', (cron) => expect(cronInWords(cron)).toBeNull());
});

describe('everyInWords', () => {
  it.each([
    [1_000, 'every second'],
    [30_000, 'every 30 seconds'],
    [60_000, 'every minute'],
    [90_000, 'every 1 minute 30 seconds'],
    [3_600_000, 'every hour'],
    [7_200_000, 'every 2 hours'],
    [86_400_000 + 3_600_000, 'every 1 day 1 hour'],
    [604_800_000, 'every week'],
    [1_500, 'every 1500 ms'],
  ])('%d ms: %s', (ms, words) => expect(everyInWords(ms)).toBe(words));
});

describeInBrowser('the dashboard: the schedules page, in headless Chromium', () => {
  let db: pg.Pool;
  let server: { app: INestApplication; baseUrl: string };
  let browser: Browser;
  let desk: BrowserContext;
  let phone: BrowserContext;
  let dash: string;
  let heartbeatStart: Date;

  const open = (context: BrowserContext, path: string): Promise<Page> => openPage(context, `${dash}${path}`);

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const url = await createTestDatabase('dashschedules');
    db = sqlPool(url);
    server = await startDashboardApp(url, {
      adapter: 'express',
      dashboard: { path: 'admin/queues', auth: dashboardBasicAuth({ users: ADMIN_USERS }), csrfSecret: 'schedules-secret-0123456789abcdef0123' },
      handlers: false,
    });
    dash = `${server.baseUrl}/admin/queues`;
    const queue = server.app.get(QueueService);
    await queue.upsertSchedule({ name: 'nightly-report', cron: '30 2 * * 1-5', timeZone: 'Europe/Paris', queue: 'reports', payload: { kind: 'nightly' } });
    await queue.upsertSchedule({ name: 'sync-prices', cron: '*/15 * * * *', queue: 'prices', payload: { source: 'feed' } });
    // Issue 43: an interval with a limit and dates, and one that fired its limit.
    heartbeatStart = new Date(Math.ceil(Date.now() / 1_000) * 1_000 + 3_600_000);
    await queue.upsertSchedule({ name: 'heartbeat', every: 90_000, queue: 'pings', limit: 5, startDate: heartbeatStart, endDate: new Date(heartbeatStart.getTime() + 86_400_000) });
    await queue.upsertSchedule({ name: 'campaign', every: 60_000, queue: 'pings', limit: 2 });
    await db.query(`UPDATE background_schedules SET fires = 2, next_fire_at = NULL, last_fire_at = now() WHERE name = 'campaign'`);
    ({ browser, desk, phone } = await openViewers(chromiumPath!));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.app.close();
    await db?.end();
  });

  it('shows each cron in words and its next three fires, the first the row holds and the others the cron gives', async () => {
    const page = await open(desk, '/schedules');
    const row = page.locator('tr[data-schedule="nightly-report"]');
    await expect(row.locator('[data-field="cron-words"]').innerText()).resolves.toBe('on weekdays at 02:30');
    await expect(page.locator('tr[data-schedule="sync-prices"] [data-field="cron-words"]').innerText()).resolves.toBe('every 15 minutes');
    const next = (await db.query<{ at: Date }>(`SELECT next_fire_at AS at FROM background_schedules WHERE name = 'nightly-report'`)).rows[0].at;
    const second = nextFireAfter('30 2 * * 1-5', 'Europe/Paris', next.getTime());
    const third = nextFireAfter('30 2 * * 1-5', 'Europe/Paris', second);
    await expect(row.locator('[data-field="next-fires"] time').evaluateAll((ts) => ts.map((t) => t.getAttribute('datetime')))).resolves.toEqual([next.toISOString(), new Date(second).toISOString(), new Date(third).toISOString()]);
    await page.screenshot({ path: `${ARTIFACTS}schedules-desk.png`, fullPage: true });
    await page.close();
  });

  it('shows an interval in words with its start and end, the fires of its limit and those left, the next fires from the start; an ended schedule says why', async () => {
    const page = await open(desk, '/schedules');
    const row = page.locator('tr[data-schedule="heartbeat"]');
    await expect(row.locator('[data-field="every"]').innerText()).resolves.toBe('every 1 minute 30 seconds');
    const start = heartbeatStart.getTime();
    await expect(row.locator('[data-field="start"] time').getAttribute('datetime')).resolves.toBe(heartbeatStart.toISOString());
    await expect(row.locator('[data-field="end"] time').getAttribute('datetime')).resolves.toBe(new Date(start + 86_400_000).toISOString());
    await expect(row.locator('[data-field="fires"]').innerText()).resolves.toBe('0 of 5');
    await expect(row.locator('[data-field="fires-left"]').innerText()).resolves.toBe('(5 left)');
    await expect(row.locator('[data-field="next-fires"] time').evaluateAll((ts) => ts.map((t) => t.getAttribute('datetime')))).resolves.toEqual(
      [0, 90_000, 180_000].map((ms) => new Date(start + ms).toISOString()),
    );
    const ended = page.locator('tr[data-schedule="campaign"]');
    await expect(ended.locator('[data-field="ended"]').innerText()).resolves.toBe('ended: its limit of 2 fires is reached');
    await expect(ended.locator('[data-field="fires"]').innerText()).resolves.toBe('2 of 2');
    await expect(ended.locator('[data-field="fires-left"]').innerText()).resolves.toBe('(0 left)');
    await expect(ended.locator('[data-field="next-fires"]').count()).resolves.toBe(0);
    // A cron schedule without a limit: its count alone, no window.
    await expect(page.locator('tr[data-schedule="sync-prices"] [data-field="fires"]').innerText()).resolves.toBe('0');
    await expect(page.locator('tr[data-schedule="sync-prices"] [data-field="window"]').count()).resolves.toBe(0);
    await page.close();
  });

  it('fires a schedule now after asking: one job of its queue with its payload, its next fire unmoved', async () => {
    const before = (await db.query<{ at: Date }>(`SELECT next_fire_at AS at FROM background_schedules WHERE name = 'sync-prices'`)).rows[0].at;
    const page = await open(desk, '/schedules');
    const asked: string[] = [];
    page.on('dialog', (dialog) => {
      asked.push(dialog.message());
      void dialog.accept();
    });
    await Promise.all([page.waitForURL(/flash=/), page.locator('tr[data-schedule="sync-prices"]').getByRole('button', { name: 'Fire now' }).click()]);
    expect(asked).toEqual(['Fire schedule sync-prices now? One job is enqueued as a tick would; its next fire stays as it is.']);
    const { rows } = await db.query<{ id: string; payload: { source: string; _schedule: { name: string } } }>(`SELECT id::text AS id, payload FROM background_jobs WHERE queue_name = 'prices'`);
    expect(rows).toHaveLength(1);
    expect(rows[0].payload.source).toBe('feed');
    expect(rows[0].payload._schedule.name).toBe('sync-prices');
    await expect(page.locator('.flash').innerText()).resolves.toBe(`Schedule sync-prices fired: job ${rows[0].id} enqueued.`);
    expect((await db.query<{ at: Date }>(`SELECT next_fire_at AS at FROM background_schedules WHERE name = 'sync-prices'`)).rows[0].at).toEqual(before);
    await page.close();
  });

  it('removes a schedule after asking, and only that one', async () => {
    const page = await open(desk, '/schedules');
    const asked: string[] = [];
    page.on('dialog', (dialog) => {
      asked.push(dialog.message());
      void dialog.accept();
    });
    await Promise.all([page.waitForURL(/flash=/), page.locator('tr[data-schedule="nightly-report"]').getByRole('button', { name: 'Remove' }).click()]);
    expect(asked).toEqual(['Remove schedule nightly-report? Its jobs already enqueued stay. This cannot be undone.']);
    expect((await db.query<{ name: string }>(`SELECT name FROM background_schedules ORDER BY name`)).rows.map((r) => r.name)).toEqual(['campaign', 'heartbeat', 'sync-prices']);
    await expect(page.locator('tr[data-schedule="nightly-report"]').count()).resolves.toBe(0);
    await page.close();
  });

  for (const [screen, width] of [['desk', 1400], ['phone', 390]] as const) {
    it(`at ${width} px: nothing wider than the screen and no clipped text in tables`, async () => {
      const page = await open(screen === 'desk' ? desk : phone, '/schedules');
      const seen = await measure(page);
      expect({ width: seen.page, wide: seen.wide, clipped: seen.clipped }).toEqual({ width, wide: [], clipped: [] });
      await page.screenshot({ path: `${ARTIFACTS}schedules-${screen}.png`, fullPage: true });
      await page.close();
    });
  }
});
