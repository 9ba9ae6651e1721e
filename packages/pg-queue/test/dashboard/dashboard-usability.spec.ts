import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { QueueService } from 'nestjs-pg-queue';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { formatSpan, formatTime } from '../../src/dashboard/views/format.js';
import { ADMIN_USERS, findChromium, launchChromium, openPage } from './support/browser.js';
import { startDashboardApp, stepper } from './support/dashboard-app.js';
import { sqlPool, waitFor } from '../support/test-app.js';

// The dashboard as operators use it (issue 23, item 4), in headless Chromium against a real database: due and
// scheduled apart, relative times and durations, selecting jobs for an action, searching payloads and errors within
// the statement timeout, a job page that follows its job, progress as a bar, and a layout that fits a phone. Each
// case asserts what the table holds.

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
const STATEMENT_TIMEOUT_MS = 1_000;
const REFRESH_MS = 1_000;
const chromiumPath = findChromium();
const describeInBrowser = chromiumPath ? describe : describe.skip;

describeInBrowser('the dashboard as operators use it, in headless Chromium', () => {
  let db: pg.Pool;
  let server: { app: INestApplication; baseUrl: string };
  let browser: Browser;
  let desk: BrowserContext;
  let phone: BrowserContext;
  let dash: string;

  const ids = async (sql: string, values: unknown[] = []) => (await db.query<{ id: string }>(sql, values)).rows.map((r) => r.id);
  const listed = (page: Page) => page.locator('tr[data-job]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')));

  const open = (context: BrowserContext, path: string): Promise<Page> => openPage(context, `${dash}${path}`);

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const url = await createTestDatabase('dashusability');
    db = sqlPool(url);
    server = await startDashboardApp(url, {
      adapter: 'express',
      dashboard: { path: 'admin/queues', auth: dashboardBasicAuth({ users: ADMIN_USERS }), csrfSecret: 'usability-secret-0123456789abcdef0123', refreshMs: REFRESH_MS, statementTimeoutMs: STATEMENT_TIMEOUT_MS },
      queue: { leaseMs: 3_000, heartbeatMs: 300 },
    });
    dash = `${server.baseUrl}/admin/queues`;
    // Queue 'mail' has no handler: what is queued stays queued. Six due jobs, three scheduled (4 min, 2 h and 3 days
    // ahead), twenty completed that each ran (claim to finish) 12 s, five failed (two with a connection reset), and
    // payloads of which three name the customer ACME-Needle.
    await db.query(`INSERT INTO background_jobs (queue_name, payload, run_at) SELECT 'mail', jsonb_build_object('to', 'u' || g || '@example.com'), now() - interval '1 minute' FROM generate_series(1, 6) AS g`);
    await db.query(`INSERT INTO background_jobs (queue_name, payload, run_at) VALUES ('mail', '{"digest": "weekly"}', now() + interval '4 min 30 s'), ('mail', '{"digest": "daily"}', now() + interval '2 hours'), ('mail', '{"digest": "monthly"}', now() + interval '3 days')`);
    await db.query(`INSERT INTO background_jobs (queue_name, payload, status, attempts, locked_at, finished_at)
      SELECT 'mail', jsonb_build_object('customer', CASE WHEN g % 7 = 0 THEN 'ACME-Needle-' || g ELSE 'other-' || g END), 'completed', 1,
             now() - (g || ' minutes')::interval - interval '12 seconds', now() - (g || ' minutes')::interval
      FROM generate_series(1, 20) AS g`);
    await db.query(`INSERT INTO background_jobs (queue_name, payload, status, attempts, max_attempts, locked_at, finished_at, last_error)
      SELECT 'mail', jsonb_build_object('n', g), 'failed', 3, 3, now() - interval '2 minutes', now() - interval '1 minute',
             CASE WHEN g <= 2 THEN 'Error: read ECONNRESET' || E'\\n    at TLSSocket' ELSE 'Error: mailbox full' END
      FROM generate_series(1, 5) AS g`);
    browser = await launchChromium(chromiumPath!);
    desk = await browser.newContext({ httpCredentials: { username: 'admin', password: 'admin-password' }, viewport: { width: 1280, height: 900 } });
    phone = await browser.newContext({ httpCredentials: { username: 'admin', password: 'admin-password' }, viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.app.close();
    await db?.end();
  });

  it('shows queued jobs as due and scheduled apart, in the overview and in the list, as the table holds them', async () => {
    const truth = (await db.query<{ due: number; scheduled: number }>(`SELECT count(*) FILTER (WHERE run_at <= now())::int AS due, count(*) FILTER (WHERE run_at > now())::int AS scheduled FROM background_jobs WHERE queue_name = 'mail' AND status = 'queued'`)).rows[0];
    expect(truth).toEqual({ due: 6, scheduled: 3 });
    const overview = await open(desk, '');
    await expect(overview.locator('[data-count="mail|due"]').innerText()).resolves.toBe('6');
    await expect(overview.locator('[data-count="mail|scheduled"]').innerText()).resolves.toBe('3');
    await overview.screenshot({ path: `${ARTIFACTS}usability-overview.png`, fullPage: true });
    // The counts' link opens the list of exactly those jobs, each marked as the column says.
    await overview.locator('[data-count="mail|scheduled"]').click();
    expect(await listed(overview)).toEqual(await ids(`SELECT id::text AS id FROM background_jobs WHERE queue_name = 'mail' AND status = 'queued' AND run_at > now() ORDER BY id DESC`));
    expect(await overview.locator('tr[data-job] .status').allInnerTexts()).toEqual(['scheduled', 'scheduled', 'scheduled']);
    await overview.goto(`${dash}/jobs?queue=mail&status=due`);
    expect(await listed(overview)).toEqual(await ids(`SELECT id::text AS id FROM background_jobs WHERE queue_name = 'mail' AND status = 'queued' AND run_at <= now() ORDER BY id DESC`));
    expect(new Set(await overview.locator('tr[data-job] .status').allInnerTexts())).toEqual(new Set(['due']));
    await overview.close();
  });

  it('lists times relative to the database clock (the absolute time on hover) and how long each finished job ran', async () => {
    const page = await open(desk, '/jobs?queue=mail');
    const [weekly] = await ids(`SELECT id::text AS id FROM background_jobs WHERE payload->>'digest' = 'weekly'`);
    const runAt = (await db.query<{ run_at: Date }>('SELECT run_at FROM background_jobs WHERE id = $1', [weekly])).rows[0].run_at;
    const when = page.locator(`tr[data-job="${weekly}"] td.when time`).first();
    await expect(when.innerText()).resolves.toMatch(/^in [34] min$/);
    // The viewer's zone (this browser's is UTC) and the ISO time on hover.
    await expect(when.getAttribute('title')).resolves.toBe(`${formatTime(runAt)} (${runAt.toISOString()})`);
    // A completed job: finished "N min ago", and "took" its claim-to-finish span, as the row holds it.
    const done = (await db.query<{ id: string; ms: number }>(`SELECT id::text AS id, (extract(epoch FROM finished_at - locked_at) * 1000)::int AS ms FROM background_jobs WHERE queue_name = 'mail' AND status = 'completed' ORDER BY id DESC LIMIT 1`)).rows[0];
    const cells = await page.locator(`tr[data-job="${done.id}"] td`).allInnerTexts();
    expect(cells).toContain(formatSpan(done.ms));
    expect(formatSpan(done.ms)).toBe('12.0 s');
    expect(cells.some((c) => /^\d+ min ago$/.test(c))).toBe(true);
    // One line per job: at 1280x900 the first page shows 17 of them here, under the filters and both action bars
    // (about seven when absolute times wrapped onto four lines); at least twelve, whatever the fonts.
    const inView = await page.locator('tr[data-job]').evaluateAll((rows) => rows.filter((r) => r.getBoundingClientRect().bottom <= (globalThis as unknown as { innerHeight: number }).innerHeight).length);
    expect(inView).toBeGreaterThanOrEqual(12);
    await page.screenshot({ path: `${ARTIFACTS}usability-jobs.png` });
    await page.close();
  });

  it('acts on the jobs ticked in the list, asking with their count, and changes exactly those', async () => {
    const page = await open(desk, '/jobs?queue=mail&status=failed');
    const failed = await listed(page);
    expect(failed).toHaveLength(5);
    // Select all ticks the page; unticking one says so.
    await page.locator('input.select-all').check();
    await expect(page.locator('.selected-count').innerText()).resolves.toBe('5 jobs selected:');
    await page.locator('input.select-all').uncheck();
    const picked = failed.slice(0, 3) as string[];
    for (const id of picked) await page.locator(`tr[data-job="${id}"] input[type="checkbox"]`).check();
    await expect(page.locator('.selected-count').innerText()).resolves.toBe('3 jobs selected:');
    const asked: string[] = [];
    page.on('dialog', (dialog) => {
      asked.push(dialog.message());
      void dialog.accept();
    });
    await page.screenshot({ path: `${ARTIFACTS}usability-selection.png` });
    await Promise.all([page.waitForURL(/flash=/), page.getByRole('button', { name: 'Retry selected' }).click()]);
    expect(asked).toEqual(['Retry the 3 selected jobs, each with a fresh set of attempts? Only failed and cancelled ones change.']);
    await expect(page.locator('.flash').innerText()).resolves.toContain('retry: 3 of 3 selected jobs changed.');
    const { rows } = await db.query<{ id: string; status: string; attempts: number }>(`SELECT id::text AS id, status::text, attempts FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id DESC`, [failed]);
    expect(rows).toEqual(failed.map((id) => ({ id, status: picked.includes(id!) ? 'queued' : 'failed', attempts: picked.includes(id!) ? 0 : 3 })));
    await page.close();
  });

  it('without JavaScript, a selection goes through the confirmation page, which names the jobs, and nothing changes before "Yes"', async () => {
    const context = await browser.newContext({ javaScriptEnabled: false, httpCredentials: { username: 'admin', password: 'admin-password' } });
    const page = await context.newPage();
    await page.goto(`${dash}/jobs?queue=mail&status=scheduled`);
    const scheduled = (await listed(page)) as string[];
    const [a, b] = scheduled;
    await page.locator(`tr[data-job="${a}"] input[type="checkbox"]`).check();
    await page.locator(`tr[data-job="${b}"] input[type="checkbox"]`).check();
    await page.getByRole('button', { name: 'Cancel selected' }).click();
    await expect(page.locator('.confirm-question').innerText()).resolves.toBe(`Cancel jobs ${a} and ${b}? Queued ones never run; running ones are told to stop; finished ones stay as they are.`);
    const statuses = async () => (await db.query<{ status: string }>(`SELECT status::text FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id DESC`, [scheduled])).rows.map((r) => r.status);
    expect(await statuses()).toEqual(['queued', 'queued', 'queued']);
    await page.getByRole('button', { name: 'Yes, do it' }).click();
    await expect(page.locator('.flash').innerText()).resolves.toContain('cancel: 2 of 2 selected jobs changed.');
    expect(await statuses()).toEqual(['cancelled', 'cancelled', 'queued']);
    // Nothing ticked: a 400 that says so, and nothing changes.
    await page.goto(`${dash}/jobs?queue=mail&status=due`);
    const response = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'), page.getByRole('button', { name: 'Delete selected' }).click()]);
    expect(response[0].status()).toBe(400);
    await expect(page.locator('p.error').innerText()).resolves.toBe('No job selected: tick the jobs to act on first.');
    expect((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'mail' AND status = 'queued' AND run_at <= now()`)).rows[0].n).toBeGreaterThan(0);
    await context.close();
  });

  it('searches payloads and errors, case-insensitively, and finds what the table holds', async () => {
    const page = await open(desk, '/jobs?text=acme-needle');
    expect(await listed(page)).toEqual(await ids(`SELECT id::text AS id FROM background_jobs WHERE strpos(lower(payload::text), 'acme-needle') > 0 ORDER BY id DESC`));
    expect(await listed(page)).toHaveLength(2);
    await page.goto(`${dash}/jobs?queue=mail&text=ECONNRESET`);
    expect(await listed(page)).toEqual(await ids(`SELECT id::text AS id FROM background_jobs WHERE last_error LIKE '%ECONNRESET%' ORDER BY id DESC`));
    await expect(page.locator('[data-stopped-early]').count()).resolves.toBe(0);
    // A search acts on its matches only through the selection: no "for all" of the whole queue.
    await expect(page.getByRole('button', { name: 'Retry all' }).count()).resolves.toBe(0);
    await page.close();
  });

  it('a search that cannot finish within the statement timeout stops there and says so, instead of failing the page', async () => {
    // Another session holds the table: every read of it waits, and each chunk of the search is cut at the time left.
    const holder = await db.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE background_jobs IN ACCESS EXCLUSIVE MODE');
      const before = String(BigInt((await db.query<{ id: string }>('SELECT 1000000::text AS id')).rows[0].id));
      const page = await desk.newPage();
      const started = Date.now();
      const response = await page.goto(`${dash}/jobs?text=needle&before=${before}`);
      const took = Date.now() - started;
      expect(response?.status()).toBe(200);
      await expect(page.locator('[data-stopped-early]').innerText()).resolves.toContain("The search stopped early: it used up the dashboard's statement timeout.");
      // Bounded by the timeout (plus the page's own work), not by how long the lock is held.
      expect(took).toBeLessThan(STATEMENT_TIMEOUT_MS * 3);
      await page.close();
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
  });

  it('the page of a running job follows it in place: progress as a bar, then its outcome, then it stops reloading', async () => {
    const id = await server.app.get(QueueService).enqueue('stepper', {});
    await waitFor('the stepper job to start', async () => stepper.waiting.length === 1);
    const page = await open(desk, `/jobs/${id}`);
    const bar = page.locator('[data-field="progress-bar"]');
    // Progress rides the heartbeat (300 ms here): the page shows it on a reload after that, without navigating.
    await page.evaluate(() => ((globalThis as unknown as { stayed: boolean }).stayed = true));
    await bar.getByText('1 of 4 (25 %)').waitFor({ timeout: 10_000 });
    await expect(bar.locator('progress').getAttribute('value')).resolves.toBe('1');
    await page.screenshot({ path: `${ARTIFACTS}usability-job-running.png`, fullPage: true });
    stepper.waiting.shift()!();
    await bar.getByText('3 of 4 (75 %)').waitFor({ timeout: 10_000 });
    expect((await db.query<{ progress: unknown }>('SELECT progress FROM background_jobs WHERE id = $1', [id])).rows[0].progress).toEqual({ current: 3, total: 4 });
    stepper.waiting.shift()!();
    await page.locator('main .status', { hasText: 'completed' }).first().waitFor({ timeout: 10_000 });
    expect((await db.query<{ status: string }>('SELECT status::text FROM background_jobs WHERE id = $1', [id])).rows[0].status).toBe('completed');
    await expect(page.evaluate(() => (globalThis as unknown as { stayed?: boolean }).stayed)).resolves.toBe(true);
    // Finished: no more reloads.
    const later: string[] = [];
    page.on('request', (r) => later.push(r.url()));
    await page.waitForTimeout(REFRESH_MS * 4);
    expect(later).toEqual([]);
    await page.close();
  });

  it('fits a phone: no page wider than the screen, every section reachable, wide tables scroll in place', async () => {
    const [failed] = await ids(`SELECT id::text AS id FROM background_jobs WHERE status = 'failed' ORDER BY id LIMIT 1`);
    for (const [name, path] of [['overview', ''], ['jobs', '/jobs?queue=mail'], ['job', `/jobs/${failed}`], ['instances', '/instances']]) {
      const page = await open(phone, path);
      // In the page: its document's width and the screen's (the test's tsconfig has no DOM types).
      const widths = await page.evaluate(() => {
        const win = globalThis as unknown as { innerWidth: number; document: { documentElement: { scrollWidth: number } } };
        return { page: win.document.documentElement.scrollWidth, screen: win.innerWidth };
      });
      expect([name, widths.page <= widths.screen]).toEqual([name, true]);
      for (const link of ['Overview', 'Jobs', 'Flows', 'Recurring', 'Instances']) await expect(page.locator('header nav').getByRole('link', { name: link }).isVisible()).resolves.toBe(true);
      await page.screenshot({ path: `${ARTIFACTS}usability-phone-${name}.png` });
      await page.close();
    }
  });
});
