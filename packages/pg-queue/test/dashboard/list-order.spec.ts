import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import type pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { ADMIN_USERS, findChromium, openViewers } from './support/browser.js';
import { startDashboardApp } from './support/dashboard-app.js';
import { sqlPool } from '../support/test-app.js';
import { buildCli, runCli } from '../support/run-cli.js';

// Issue 44: the dashboard's Jobs page and `pg-queue jobs list` list the same jobs in the same order (newest first; oldest
// first on request: ?order=oldest, --oldest-first), one definition of it (store/job-list-order.ts), page by page.

const chromiumPath = findChromium();
const describeInBrowser = chromiumPath ? describe : describe.skip;

describeInBrowser('the jobs list: the dashboard and the command line in one order', () => {
  let db: pg.Pool;
  let url: string;
  let server: { app: INestApplication; baseUrl: string };
  let browser: Browser;
  let desk: BrowserContext;
  let dash: string;

  beforeAll(async () => {
    url = await createTestDatabase('dashorder');
    db = sqlPool(url);
    server = await startDashboardApp(url, {
      adapter: 'express',
      dashboard: { path: 'admin/queues', auth: dashboardBasicAuth({ users: ADMIN_USERS }), csrfSecret: 'order-secret-0123456789abcdef0123456789' },
      queue: { workers: false },
      handlers: false,
    });
    dash = `${server.baseUrl}/admin/queues`;
    // 53 jobs of 'emails' in three statuses, and 2 of 'sms' among them (ids 19 and 38).
    await db.query(`INSERT INTO background_jobs (queue_name, payload, status, finished_at)
      SELECT CASE WHEN g % 19 = 0 THEN 'sms' ELSE 'emails' END, jsonb_build_object('n', g),
             (ARRAY['queued', 'completed', 'failed', 'completed'])[1 + g % 4]::background_job_status,
             CASE WHEN g % 4 <> 0 THEN now() END
      FROM generate_series(1, 55) AS g`);
    await buildCli();
    ({ browser, desk } = await openViewers(chromiumPath!));
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await server?.app.close();
    await db?.end();
  });

  const cliIds = async (args: string[]) => {
    const result = await runCli(['jobs', 'list', '--json', '--limit', '50', ...args], { DATABASE_URL: url });
    expect(result.code).toBe(0);
    return result.stdout.trim().split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { id: string }).id);
  };
  const rowsOf = (page: Page) => page.locator('tr[data-job]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')!));

  it.each([
    ['queue=emails', ['--queue', 'emails'], `queue_name = 'emails'`],
    ['queue=emails&status=completed', ['--queue', 'emails', '--status', 'completed'], `queue_name = 'emails' AND status = 'completed'`],
    ['status=failed', ['--status', 'failed'], `status = 'failed'`],
    ['', [], 'true'],
  ])('?%s: the same first page as the CLI, newest first, and oldest first on request', async (query, args, where) => {
    const ids = async (order: string) => (await db.query<{ id: string }>(`SELECT j.id::text AS id FROM background_jobs AS j WHERE ${where} ORDER BY j.id ${order} LIMIT 50`)).rows.map((r) => r.id);
    const page = await desk.newPage();
    await page.goto(`${dash}/jobs?${query}`);
    const newest = await rowsOf(page);
    await page.goto(`${dash}/jobs?${query}&order=oldest`);
    const oldest = await rowsOf(page);
    expect({ newest, oldest }).toEqual({ newest: await ids('DESC'), oldest: await ids('') });
    expect({ newest: await cliIds(args), oldest: await cliIds([...args, '--oldest-first']) }).toEqual({ newest, oldest });
    await page.close();
  });

  it('pages oldest first with "Newer »" as the CLI does with --after; refuses an unknown order and a text search oldest first', async () => {
    const page = await desk.newPage();
    await page.goto(`${dash}/jobs?queue=emails&order=oldest`);
    const first = await rowsOf(page);
    await page.getByRole('link', { name: 'Newer »' }).click();
    const second = await rowsOf(page);
    expect([first.length, second.length]).toEqual([50, 3]);
    expect(second).toEqual(await cliIds(['--queue', 'emails', '--oldest-first', '--after', first.at(-1)!]));
    // The order select keeps the filter: oldest first stays chosen.
    await expect(page.locator('select[name="order"]').inputValue()).resolves.toBe('oldest');
    expect((await page.goto(`${dash}/jobs?text=n&order=oldest`))!.status()).toBe(400);
    await expect(page.locator('.error').innerText()).resolves.toContain('A payload or error search lists newest first');
    expect((await page.goto(`${dash}/jobs?order=sideways`))!.status()).toBe(400);
    await expect(page.locator('.error').innerText()).resolves.toBe('Unknown job list order "sideways": one of newest, oldest.');
    await page.close();
  });
});
