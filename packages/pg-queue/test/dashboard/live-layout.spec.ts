import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { QueueService } from 'nestjs-pg-queue';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { ADMIN_USERS, findChromium, openPage, openViewers, stayed } from './support/browser.js';
import { startDashboardApp } from './support/dashboard-app.js';
import { measure } from './support/layout-checks.js';
import { sqlPool } from '../support/test-app.js';

// Issue 44, the dashboard against Oban Web, River UI and bull-board: live tables and counts with a pause button,
// no clipped text and nothing wider than the screen at 1400 px and 390 px, times in the viewer's zone, and a
// completed job's earlier error labelled as such. In headless Chromium against a real database; what changes is
// written with SQL and read back from the page without a reload.

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
const REFRESH_MS = 1_000;
const chromiumPath = findChromium();
const describeInBrowser = chromiumPath ? describe : describe.skip;

describeInBrowser('the dashboard live and laid out for any screen, in headless Chromium', () => {
  let db: pg.Pool;
  let server: { app: INestApplication; baseUrl: string };
  let browser: Browser;
  let desk: BrowserContext;
  let phone: BrowserContext;
  let dash: string;
  let completedWithError: string;
  let failed: string;
  let flowId: string;

  const open = (context: BrowserContext, path: string): Promise<Page> => openPage(context, `${dash}${path}`);
  const enqueue = async (queue: string, n: number) =>
    (await db.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, payload) SELECT $1, jsonb_build_object('n', g) FROM generate_series(1, $2::int) AS g RETURNING id::text AS id`, [queue, n])).rows.map((r) => r.id);

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const url = await createTestDatabase('dashlive');
    db = sqlPool(url);
    server = await startDashboardApp(url, {
      adapter: 'express',
      dashboard: { path: 'admin/queues', auth: dashboardBasicAuth({ users: ADMIN_USERS }), csrfSecret: 'live-layout-secret-0123456789abcdef0123', refreshMs: REFRESH_MS },
      handlers: false,
    });
    dash = `${server.baseUrl}/admin/queues`;
    // A queue nobody serves ('reports'): what is queued stays queued. Long payloads and errors without spaces are the
    // cells that clipped before (a cap of 1,200 px and an ellipsis mid-word).
    const long = 'x'.repeat(150);
    await db.query(`INSERT INTO background_jobs (queue_name, payload) SELECT 'reports', jsonb_build_object('report', 'quarterly-' || g, 'filler', $1::text) FROM generate_series(1, 4) AS g`, [long]);
    failed = (await db.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, payload, status, attempts, max_attempts, locked_at, finished_at, last_error)
      VALUES ('reports', '{"report": "annual"}', 'failed', 3, 3, now() - interval '3 minutes', now() - interval '2 minutes', $1) RETURNING id::text AS id`,
      [`Error: the upstream service answered 503 Service Unavailable after 30000 ms: https://reports.example.com/api/v2/render?report=annual&format=pdf&${long}\n    at render (reports.ts:12:3)`])).rows[0].id;
    completedWithError = (await db.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, payload, status, attempts, max_attempts, locked_at, finished_at, last_error)
      VALUES ('reports', '{"report": "monthly"}', 'completed', 2, 3, now() - interval '90 seconds', now() - interval '1 minute', 'Error: socket hang up') RETURNING id::text AS id`)).rows[0].id;
    // A zone that is not the server's (UTC) and has no daylight saving: the times must show in it.
    // A flow of long names nobody runs (its first job queued, the others blocked), for the flows list and its page.
    const queue = server.app.get(QueueService);
    flowId = (await queue.enqueueFlow({
      name: 'quarterly-report-for-the-northern-region-with-every-appendix',
      jobs: [
        { ref: 'collect-every-figure-of-the-quarter', queue: 'archive', payload: { step: 'collect', filler: long } },
        { ref: 'render-the-portable-document', queue: 'archive', payload: { step: 'render' }, dependsOn: ['collect-every-figure-of-the-quarter'] },
        { ref: 'mail-it-to-the-board-of-directors', queue: 'archive', payload: { step: 'mail' }, dependsOn: ['render-the-portable-document'] },
      ],
    })).id;
    ({ browser, desk, phone } = await openViewers(chromiumPath!, 'Asia/Kolkata'));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.app.close();
    await db?.end();
  });

  it("updates the overview's counts and the jobs list without a reload, and the pause button stops both until resumed", async () => {
    const overview = await open(desk, '');
    const due = overview.locator('[data-count="reports|due"]');
    await expect(due.innerText()).resolves.toBe('4');
    const jobs = await open(desk, '/jobs?queue=reports');
    const [first] = await enqueue('reports', 3);
    await due.getByText('7', { exact: true }).waitFor({ timeout: 10_000 });
    await jobs.locator(`tr[data-job="${first}"]`).waitFor({ timeout: 10_000 });
    expect(await stayed(overview)).toBe(true);
    expect(await stayed(jobs)).toBe(true);
    expect((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'reports' AND status = 'queued'`)).rows[0].n).toBe(7);

    // Paused: nothing is fetched, new jobs do not appear; the button says how to resume.
    const toggle = jobs.locator('button[data-live-toggle]');
    await expect(toggle.innerText()).resolves.toBe('Pause live updates');
    await toggle.click();
    await expect(toggle.getAttribute('aria-pressed')).resolves.toBe('true');
    await expect(toggle.innerText()).resolves.toBe('Resume live updates');
    const fetched: string[] = [];
    jobs.on('request', (r) => fetched.push(r.url()));
    const [held] = await enqueue('reports', 1);
    await jobs.waitForTimeout(REFRESH_MS * 3);
    expect(fetched).toEqual([]);
    await expect(jobs.locator(`tr[data-job="${held}"]`).count()).resolves.toBe(0);
    await jobs.screenshot({ path: `${ARTIFACTS}live-paused.png` });
    await toggle.click();
    await jobs.locator(`tr[data-job="${held}"]`).waitFor({ timeout: 10_000 });
    expect(await stayed(jobs)).toBe(true);
    await overview.close();
    await jobs.close();
  });

  it('keeps the ticked jobs ticked when the list refreshes under them', async () => {
    const page = await open(desk, '/jobs?queue=reports&status=due');
    const [ticked] = await page.locator('tr[data-job]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')!));
    await page.locator(`tr[data-job="${ticked}"] input[type="checkbox"]`).check();
    const [fresh] = await enqueue('reports', 1);
    await page.locator(`tr[data-job="${fresh}"]`).waitFor({ timeout: 10_000 });
    await expect(page.locator(`tr[data-job="${ticked}"] input[type="checkbox"]`).isChecked()).resolves.toBe(true);
    await expect(page.locator('.selected-count').innerText()).resolves.toBe('1 job selected:');
    await page.close();
  });

  it("labels a completed job's error as an earlier attempt's; a failed job's stands as its last", async () => {
    const page = await open(desk, '/jobs?queue=reports');
    await expect(page.locator(`tr[data-job="${completedWithError}"] td.error-cell`).innerText()).resolves.toBe('earlier attempt: Error: socket hang up');
    await expect(page.locator(`tr[data-job="${failed}"] [data-earlier-error]`).count()).resolves.toBe(0);
    await expect(page.locator(`tr[data-job="${failed}"] td.error-cell`).innerText()).resolves.toContain('503 Service Unavailable');
    await page.close();
  });

  it("shows times in the viewer's zone, and a relative time's local and ISO times on hover", async () => {
    const page = await open(desk, `/jobs/${failed}`);
    const finished = (await db.query<{ at: Date }>('SELECT finished_at AS at FROM background_jobs WHERE id = $1', [failed])).rows[0].at;
    // The timeline's finish: in India's zone (UTC+5:30), with the ISO time on hover.
    const stamp = page.locator(`ol.timeline time[datetime="${finished.toISOString()}"]`).first();
    await expect(stamp.innerText()).resolves.toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d GMT\+5:30$/);
    await expect(stamp.getAttribute('title')).resolves.toBe(finished.toISOString());
    const local = new Date(finished.getTime() + 5.5 * 3_600_000).toISOString().slice(11, 19);
    await expect(stamp.innerText()).resolves.toContain(local);
    await page.goto(`${dash}/jobs?queue=reports`);
    const relative = page.locator(`tr[data-job="${failed}"] td.when time`).nth(1);
    await expect(relative.innerText()).resolves.toBe('2 min ago');
    await expect(relative.getAttribute('title')).resolves.toBe(`${new Date(finished.getTime() + 5.5 * 3_600_000).toISOString().slice(0, 19).replace('T', ' ')} GMT+5:30 (${finished.toISOString()})`);
    await page.close();
  });

  for (const [screen, width] of [['desk', 1400], ['phone', 390]] as const) {
    it(`at ${width} px: no element wider than the screen and no clipped text in tables, on every page`, async () => {
      const context = screen === 'desk' ? desk : phone;
      const pages = [
        ['overview', ''], ['jobs', '/jobs?queue=reports'], ['job', `/jobs/${failed}`], ['job-completed', `/jobs/${completedWithError}`],
        ['flows', '/flows'], ['flow', `/flows/${flowId}`], ['instances', '/instances'], ['queue', '/queues/reports'], ['schedules', '/schedules'],
      ];
      for (const [name, path] of pages) {
        const page = await open(context, path);
        const seen = await measure(page);
        expect({ name, width: seen.page, wide: seen.wide, clipped: seen.clipped }).toEqual({ name, width, wide: [], clipped: [] });
        expect(seen.screen).toBe(width);
        await page.screenshot({ path: `${ARTIFACTS}live-${screen}-${name}.png`, fullPage: true });
        await page.close();
      }
    });
  }
});
