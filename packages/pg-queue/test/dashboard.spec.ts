import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type CanActivate, type ExecutionContext, type INestApplication } from '@nestjs/common';
import { createHmac } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { PgQueueModule, QueueService } from 'nestjs-pg-queue';
import { dashboardBasicAuth, PgQueueDashboardModule } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { findChromium, launchChromium } from './dashboard/support/browser.js';
import { flaky, startDashboardApp } from './dashboard/support/dashboard-app.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

const SECRET = 'test-secret-of-the-dashboard-csrf-hmac-0123456789';
const USERS = [
  { name: 'admin', password: 'admin-password', access: 'full' as const },
  { name: 'viewer', password: 'viewer-password', access: 'read-only' as const },
];
const ARTIFACTS = fileURLToPath(new URL('./dashboard/artifacts/', import.meta.url));
const chromiumPath = findChromium();
const describeInBrowser = chromiumPath ? describe : describe.skip;

/** What the table holds, per queue and status; queued jobs as due (run_at reached) and scheduled (run_at ahead). */
async function tableCounts(db: pg.Pool): Promise<Record<string, Record<string, number>>> {
  const { rows } = await db.query<{ queue_name: string; status: string; n: number }>(
    `SELECT queue_name, CASE WHEN status = 'queued' THEN CASE WHEN run_at > now() THEN 'scheduled' ELSE 'due' END ELSE status::text END AS status, count(*)::int AS n
     FROM background_jobs GROUP BY 1, 2`,
  );
  const out: Record<string, Record<string, number>> = {};
  for (const r of rows) (out[r.queue_name] ??= {})[r.status] = r.n;
  return out;
}

const statusOf = async (db: pg.Pool, id: string) => (await db.query<{ status: string }>('SELECT status::text FROM background_jobs WHERE id = $1', [id])).rows[0]?.status;

describeInBrowser('the dashboard in headless Chromium', () => {
  let db: pg.Pool;
  let express: { app: INestApplication; baseUrl: string };
  let fastify: { app: INestApplication; baseUrl: string };
  let browser: Browser;
  let admin: BrowserContext;
  let viewer: BrowserContext;
  let failedId: string;
  const logs: string[] = [];
  const dash = (base: string) => `${base}/admin/queues`;

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const url = await createTestDatabase('dashboard');
    db = sqlPool(url);
    const dashboard = { path: 'admin/queues', auth: dashboardBasicAuth({ users: USERS }), csrfSecret: SECRET, refreshMs: 1_000 };
    express = await startDashboardApp(url, { adapter: 'express', dashboard, logs });
    // The Fastify app runs no workers: the Express app's worker runs what its dashboard retries.
    fastify = await startDashboardApp(url, { adapter: 'fastify', dashboard, queue: { workers: false }, handlers: false });
    const queue = express.app.get(QueueService);
    // Static queues (no handler) with known contents, one failed job of 'flaky' with a stack, a schedule.
    await db.query(`INSERT INTO background_jobs (queue_name, payload, status, attempts, finished_at, last_error)
      SELECT 'emails', jsonb_build_object('to', 'user' || g || '@example.com'), s.status::background_job_status, 1,
             CASE WHEN s.status IN ('completed', 'failed', 'cancelled') THEN now() - (g || ' minutes')::interval END,
             CASE WHEN s.status = 'failed' THEN 'Error: mailbox full' || E'\\n    at send (mailer.ts:12:5)' END
      FROM (VALUES ('queued', 7), ('completed', 40), ('failed', 3), ('cancelled', 2)) AS s(status, n), generate_series(1, s.n) AS g`);
    await db.query(`INSERT INTO background_jobs (queue_name, payload, run_at) SELECT 'reports', '{"month": "2026-11"}', now() + interval '1 day' FROM generate_series(1, 4)`);
    await db.query(`INSERT INTO background_jobs (queue_name, payload, unique_key) VALUES ('reports', '{"month": "2026-10"}', 'report-2026-10')`);
    await queue.pause('reports');
    await queue.upsertSchedule({ name: 'nightly-report', cron: '0 3 * * *', queue: 'reports', timeZone: 'Europe/Paris' });
    failedId = await queue.enqueue('flaky', { n: 1 });
    await waitFor('the flaky job to fail', async () => (await statusOf(db, failedId)) === 'failed');

    browser = await launchChromium(chromiumPath!);
    admin = await browser.newContext({ httpCredentials: { username: 'admin', password: 'admin-password' }, viewport: { width: 1280, height: 900 } });
    viewer = await browser.newContext({ httpCredentials: { username: 'viewer', password: 'viewer-password' }, viewport: { width: 1280, height: 900 } });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await fastify?.app.close();
    await express?.app.close();
    await db?.end();
  });

  async function open(context: BrowserContext, url: string): Promise<Page> {
    const page = await context.newPage();
    const response = await page.goto(url);
    expect(response?.status()).toBe(200);
    return page;
  }

  it('the overview shows, per queue and status, what the table holds', async () => {
    const page = await open(admin, dash(express.baseUrl));
    const expected = await tableCounts(db);
    const shown: Record<string, Record<string, number>> = {};
    for (const cell of await page.locator('[data-count]').all()) {
      const [queue, status] = (await cell.getAttribute('data-count'))!.split('|');
      const n = Number((await cell.innerText()).replace(/[^0-9]/g, ''));
      if (n > 0) (shown[queue] ??= {})[status] = n;
    }
    expect(shown).toEqual(expected);
    expect(expected.emails).toEqual({ due: 7, completed: 40, failed: 3, cancelled: 2 });
    // The delayed reports are scheduled, apart from the one that is due.
    expect(expected.reports).toEqual({ due: 1, scheduled: 4 });
    await expect(page.locator('tr[data-queue="reports"]').innerText()).resolves.toContain('paused');
    // The chart of the last hour: the 40 completed and 3 failed emails, drawn on the server.
    await expect(page.locator('section.card:has(h3:text-is("emails")) figcaption').innerText()).resolves.toContain('40 completed · 3 failed');
    await page.screenshot({ path: `${ARTIFACTS}overview.png`, fullPage: true });
    await page.close();
  });

  it('retrying a failed job from its page makes it run to completion', async () => {
    const page = await open(admin, `${dash(express.baseUrl)}/jobs/${failedId}`);
    await expect(page.locator('pre.stack').innerText()).resolves.toContain(`upstream refused job ${failedId}`);
    await page.screenshot({ path: `${ARTIFACTS}job-failed.png`, fullPage: true });
    flaky.fail = false;
    const asked: string[] = [];
    page.on('dialog', (dialog) => {
      asked.push(dialog.message());
      void dialog.accept();
    });
    await Promise.all([page.waitForURL(/flash=/), page.getByRole('button', { name: 'Retry' }).click()]);
    expect(asked).toEqual([`Retry job ${failedId} with a fresh set of attempts?`]);
    await expect(page.locator('.flash').innerText()).resolves.toContain(`Job ${failedId}: retry done.`);
    await waitFor('the retried job to complete', async () => (await statusOf(db, failedId)) === 'completed');
    // A fresh set of attempts: the run after the retry was attempt 1 of 1 again (without the reset it is 2 of 1,
    // and completes just the same).
    expect((await db.query('SELECT attempts, max_attempts FROM background_jobs WHERE id = $1', [failedId])).rows[0]).toEqual({ attempts: 1, max_attempts: 1 });
    // The audit log: who, what, how many.
    expect(logs).toContain(`user "admin" retried 1 job (retry on job ${failedId})`);
    await page.close();
  });

  it('lists jobs by queue and status with keyset pages, and finds a job by unique key', async () => {
    const page = await open(admin, `${dash(express.baseUrl)}/jobs?queue=emails&status=completed`);
    await expect(page.locator('tr[data-job]').count()).resolves.toBe(40);
    await page.screenshot({ path: `${ARTIFACTS}jobs.png` });
    // Keyset pages of 50: the 52 emails jobs are 50 newest, then "Older" (ids below the last one shown) has 2.
    await page.goto(`${dash(express.baseUrl)}/jobs?queue=emails`);
    const firstPage = await page.locator('tr[data-job]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')));
    await page.getByRole('link', { name: 'Older »' }).click();
    const secondPage = await page.locator('tr[data-job]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')));
    const { rows: emails } = await db.query<{ id: string }>(`SELECT j.id::text AS id FROM background_jobs AS j WHERE j.queue_name = 'emails' ORDER BY j.id DESC`);
    expect([firstPage, secondPage]).toEqual([emails.slice(0, 50).map((r) => r.id), emails.slice(50).map((r) => r.id)]);
    const found = await open(admin, `${dash(express.baseUrl)}/jobs?q=report-2026-10`);
    const { rows } = await db.query<{ id: string }>(`SELECT id::text FROM background_jobs WHERE unique_key = 'report-2026-10'`);
    await expect(found.locator('tr[data-job]').getAttribute('data-job')).resolves.toBe(rows[0].id);
    await page.close();
    await found.close();
  });

  it('bulk "run now" from the list asks first, then changes every matching job, and the schedule pauses', async () => {
    const page = await open(admin, `${dash(express.baseUrl)}/jobs?queue=reports&status=queued`);
    page.on('dialog', (dialog) => void dialog.accept());
    await Promise.all([page.waitForURL(/flash=/), page.getByRole('button', { name: 'Run all now' }).click()]);
    const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'reports' AND run_at > now()`);
    expect(rows[0].n).toBe(0);
    await expect(page.locator('.flash').innerText()).resolves.toContain('run-now: 4 jobs changed');

    const schedules = await open(admin, `${dash(express.baseUrl)}/schedules`);
    schedules.on('dialog', (dialog) => void dialog.accept());
    await Promise.all([schedules.waitForURL(/flash=/), schedules.locator('tr[data-schedule="nightly-report"]').getByRole('button', { name: 'Pause' }).click()]);
    const paused = await db.query<{ paused: boolean }>(`SELECT paused FROM background_schedules WHERE name = 'nightly-report'`);
    expect(paused.rows[0].paused).toBe(true);
    await schedules.screenshot({ path: `${ARTIFACTS}schedules.png`, fullPage: true });
    await page.close();
    await schedules.close();
  });

  it('without JavaScript, an action answers with a confirmation page first', async () => {
    const context = await browser.newContext({ javaScriptEnabled: false, httpCredentials: { username: 'admin', password: 'admin-password' } });
    const page = await open(context, `${dash(express.baseUrl)}/jobs?queue=emails&status=failed`);
    await page.getByRole('button', { name: 'Retry all' }).click();
    // The question the browser would ask with JavaScript, as a sentence ("Do this: jobs bulk retry (queue emails)?" before).
    await expect(page.locator('.confirm-question').innerText()).resolves.toBe('Retry every failed job in queue emails, each with a fresh set of attempts?');
    expect((await tableCounts(db)).emails.failed).toBe(3);
    await page.screenshot({ path: `${ARTIFACTS}confirm.png`, fullPage: true });
    const { rows } = await db.query<{ id: string }>(`SELECT id::text FROM background_jobs WHERE queue_name = 'emails' AND status = 'failed' ORDER BY id LIMIT 1`);
    await page.goto(`${dash(express.baseUrl)}/jobs/${rows[0].id}`);
    await page.getByRole('button', { name: 'Delete' }).click();
    await expect(page.locator('.confirm-question').innerText()).resolves.toBe(`Delete job ${rows[0].id}? This cannot be undone.`);
    expect(await statusOf(db, rows[0].id)).toBe('failed');
    await context.close();
  });

  it('a read-only user sees no action buttons, and a forged POST with a valid CSRF token is refused', async () => {
    const page = await open(viewer, dash(express.baseUrl));
    // No action button: the header's "Pause live updates" acts on the page only.
    await expect(page.locator('button:not([data-live-toggle])').count()).resolves.toBe(0);
    await expect(page.locator('form[method="post"]').count()).resolves.toBe(0);
    await page.screenshot({ path: `${ARTIFACTS}overview-read-only.png`, fullPage: true });
    const { rows } = await db.query<{ id: string }>(`SELECT id::text FROM background_jobs WHERE queue_name = 'emails' AND status = 'failed' ORDER BY id LIMIT 1`);
    await page.goto(`${dash(express.baseUrl)}/jobs/${rows[0].id}`);
    // No action button: the header's "Pause live updates" acts on the page only.
    await expect(page.locator('button:not([data-live-toggle])').count()).resolves.toBe(0);
    // The viewer's own CSRF cookie and its correct token: only the access level stands in the way.
    const nonce = (await viewer.cookies()).find((c) => c.name === 'pgq_dashboard_csrf')!.value;
    const token = createHmac('sha256', SECRET).update(nonce).digest('base64url');
    const status = await page.evaluate(
      async ([url, csrf]) => (await fetch(url, { method: 'POST', body: new URLSearchParams({ _csrf: csrf, confirmed: '1' }) })).status,
      [`${dash(express.baseUrl)}/jobs/${rows[0].id}/retry`, token] as const,
    );
    expect(status).toBe(403);
    expect(await statusOf(db, rows[0].id)).toBe('failed');
    expect(logs).toContain(`refused a POST to /jobs/${rows[0].id}/retry by viewer: read-only access`);
    await page.close();
  });

  it('a POST without the CSRF token (or with a wrong one) is refused, even from a full-access user', async () => {
    const page = await open(admin, dash(express.baseUrl));
    const { rows } = await db.query<{ id: string }>(`SELECT id::text FROM background_jobs WHERE queue_name = 'emails' AND status = 'failed' ORDER BY id LIMIT 1`);
    const post = (body: Record<string, string>) =>
      page.evaluate(async ([url, fields]) => (await fetch(url, { method: 'POST', body: new URLSearchParams(fields) })).status, [`${dash(express.baseUrl)}/jobs/${rows[0].id}/delete`, body] as const);
    expect(await post({ confirmed: '1' })).toBe(403);
    expect(await post({ confirmed: '1', _csrf: 'x'.repeat(43) })).toBe(403);
    expect(await statusOf(db, rows[0].id)).toBe('failed');
    await page.close();
  });

  it('a NUL in a filter or a job id past the bigint range answers 400 or 404, not 500 with a logged stack', async () => {
    const auth = { authorization: `Basic ${Buffer.from('admin:admin-password').toString('base64')}` };
    const get = async (path: string) => (await fetch(`${dash(express.baseUrl)}${path}`, { headers: auth })).status;
    const paths = ['/jobs?q=%00', '/jobs?q=a%00b', '/jobs?queue=%00', '/jobs?before=9999999999999999999', '/jobs/9999999999999999999', '/jobs/9223372036854775808'];
    expect(await Promise.all(paths.map(async (path) => [path, await get(path)]))).toEqual([
      ['/jobs?q=%00', 400], ['/jobs?q=a%00b', 400], ['/jobs?queue=%00', 400], ['/jobs?before=9999999999999999999', 400],
      ['/jobs/9999999999999999999', 404], ['/jobs/9223372036854775808', 404],
    ]);
    expect(await get('/jobs/9223372036854775807')).toBe(404); // the largest id: a valid id, no such job
    const page = await open(admin, dash(express.baseUrl));
    const nonce = (await admin.cookies()).find((c) => c.name === 'pgq_dashboard_csrf')!.value;
    const token = createHmac('sha256', SECRET).update(nonce).digest('base64url');
    const status = await page.evaluate(
      async ([url, csrf]) => (await fetch(url, { method: 'POST', body: new URLSearchParams({ _csrf: csrf, confirmed: '1' }) })).status,
      [`${dash(express.baseUrl)}/jobs/9999999999999999999/retry`, token] as const,
    );
    expect(status).not.toBe(500);
    await page.close();
    expect(logs.filter((line) => /out of range|invalid byte sequence|\\0|0x00/i.test(line))).toEqual([]);
  });

  it('an unauthenticated request gets 401 with a basic-auth challenge; wrong credentials too', async () => {
    for (const path of ['', '/jobs', '/api/summary', '/assets/dashboard.js']) {
      const response = await fetch(`${dash(express.baseUrl)}${path}`);
      expect([path, response.status, response.headers.get('www-authenticate')]).toEqual([path, 401, 'Basic realm="pg-queue dashboard", charset="UTF-8"']);
    }
    const post = await fetch(`${dash(express.baseUrl)}/queues/emails/pause`, { method: 'POST', body: new URLSearchParams({ confirmed: '1' }) });
    expect(post.status).toBe(401);
    const wrong = await fetch(dash(express.baseUrl), { headers: { authorization: `Basic ${Buffer.from('admin:nope-nope-nope').toString('base64')}` } });
    expect(wrong.status).toBe(401);
    expect((await db.query(`SELECT 1 FROM background_queues WHERE queue_name = 'emails' AND paused`)).rowCount).toBe(0);
  });

  it('Fastify serves the same pages and actions (form bodies, cookies, redirects)', async () => {
    const page = await open(admin, dash(fastify.baseUrl));
    const shown = await page.locator('[data-count="emails|completed"]').innerText();
    expect(Number(shown)).toBe((await tableCounts(db)).emails.completed);
    page.on('dialog', (dialog) => void dialog.accept());
    await Promise.all([page.waitForURL(/flash=/), page.locator('tr[data-queue="emails"]').getByRole('button', { name: 'Pause' }).click()]);
    expect((await db.query(`SELECT 1 FROM background_queues WHERE queue_name = 'emails' AND paused`)).rowCount).toBe(1);
    const summary = (await page.evaluate(async (url) => (await fetch(url)).json(), `${dash(fastify.baseUrl)}/api/summary`)) as { counts: Record<string, Record<string, number>> };
    expect(summary.counts.emails.completed).toBe(40);
    await page.close();
  });

  it('the queue page shows the limits in force and changes them at runtime (full access, CSRF, confirmed); a viewer gets no form, bad input a 400', async () => {
    const page = await open(admin, `${dash(express.baseUrl)}/queues/emails`);
    await expect(page.locator('[data-limit="globalConcurrency"]').innerText()).resolves.toContain("the decorator's");
    page.on('dialog', (dialog) => void dialog.accept());
    await page.locator('form.limits input[name="global"]').fill('3');
    await page.locator('form.limits input[name="rate"]').fill('10/1000');
    await page.locator('form.limits input[name="perKey"]').fill('none');
    await Promise.all([page.waitForURL(/flash=/), page.getByRole('button', { name: 'Save limits' }).click()]);
    expect((await db.query(`SELECT limits FROM background_queues WHERE queue_name = 'emails'`)).rows).toEqual([
      { limits: { globalConcurrency: 3, rateLimit: { max: 10, intervalMs: 1_000 }, concurrencyPerKey: null } },
    ]);
    await page.goto(`${dash(express.baseUrl)}/queues/emails`);
    await expect(page.locator('[data-limit="globalConcurrency"]').innerText()).resolves.toBe('3 (set at runtime)');
    await expect(page.locator('form.limits input[name="perKey"]').inputValue()).resolves.toBe('none');
    // A bad value: 400 from the form's own check, nothing stored.
    await page.locator('form.limits input[name="global"]').fill('0');
    await Promise.all([page.waitForLoadState(), page.getByRole('button', { name: 'Save limits' }).click()]);
    await expect(page.locator('p.error').innerText()).resolves.toContain('globalConcurrency must be an integer from 1 to 1000000');
    expect((await db.query(`SELECT limits->'globalConcurrency' AS g FROM background_queues WHERE queue_name = 'emails'`)).rows).toEqual([{ g: 3 }]);
    await page.close();
    const readOnly = await open(viewer, `${dash(express.baseUrl)}/queues/emails`);
    expect(await readOnly.locator('form.limits').count()).toBe(0);
    await readOnly.close();
    await express.app.get(QueueService).setQueueLimits('emails', { globalConcurrency: null, rateLimit: null, concurrencyPerKey: null });
  });

  it('survives its idle connections being killed (a server restart): the next page opens new ones', async () => {
    const before = await fetch(`${dash(express.baseUrl)}/api/summary`, { headers: { authorization: `Basic ${Buffer.from('admin:admin-password').toString('base64')}` } });
    expect(before.status).toBe(200);
    const killed = await db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'nestjs-pg-queue dashboard'`);
    expect(killed.rowCount).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 200));
    const after = await fetch(`${dash(express.baseUrl)}/api/summary`, { headers: { authorization: `Basic ${Buffer.from('admin:admin-password').toString('base64')}` } });
    expect(after.status).toBe(200);
    expect(logs).toContainEqual(expect.stringMatching(/^an idle connection of the dashboard's pool failed/));
  });

  it('auto-refresh updates the overview counts from the summary endpoint', async () => {
    const page = await open(admin, dash(express.baseUrl));
    await db.query(`INSERT INTO background_jobs (queue_name, payload, status, finished_at) SELECT 'emails', '{}', 'cancelled', now() FROM generate_series(1, 5)`);
    const expected = String((await tableCounts(db)).emails.cancelled);
    // No reload: the page's script polls /api/summary every refreshMs (1 s here) and rewrites the cells.
    await waitFor('the count to refresh', async () => (await page.locator('[data-count="emails|cancelled"]').innerText()) === expected, 10_000, 100);
    await page.close();
  });
});

@Injectable()
class HeaderGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ headers: Record<string, string>; user?: unknown }>();
    if (req.headers['x-team'] !== 'ops') return false;
    req.user = { username: 'ops-guard' };
    return true;
  }
}

describe('PgQueueDashboardModule options', () => {
  let url: string;
  let db: pg.Pool;
  beforeAll(async () => {
    url = await createTestDatabase('dashboard_boot');
    db = sqlPool(url);
  });
  afterAll(async () => {
    await db?.end();
  });

  it('auth: { guard } lets through what the guard allows (403 otherwise); hidePayloads keeps payloads and errors out of every page', async () => {
    const { app, baseUrl } = await startDashboardApp(url, { adapter: 'express', dashboard: { path: 'ops/queues', auth: { guard: HeaderGuard }, hidePayloads: true }, queue: { workers: false }, handlers: false });
    try {
      // Handlers often put payload data in their errors: the last error is hidden too.
      const { rows } = await db.query<{ id: string }>(
        `INSERT INTO background_jobs (queue_name, payload, status, last_error, finished_at) VALUES ('secret', '{"card": "4111-SECRET"}', 'failed', 'Error: card 4111-ERRSECRET declined', now()) RETURNING id::text`,
      );
      expect((await fetch(`${baseUrl}/ops/queues`)).status).toBe(403);
      for (const path of ['', '/jobs?queue=secret', `/jobs/${rows[0].id}`]) {
        const response = await fetch(`${baseUrl}/ops/queues${path}`, { headers: { 'x-team': 'ops' } });
        const body = await response.text();
        expect([path, response.status, body.includes('4111-SECRET'), body.includes('4111-ERRSECRET'), body.includes('ops-guard · full access')]).toEqual([path, 200, false, false, true]);
      }
      expect(await (await fetch(`${baseUrl}/ops/queues/jobs/${rows[0].id}`, { headers: { 'x-team': 'ops' } })).text()).toContain('hidden (hidePayloads)');
    } finally {
      await app.close();
    }
  });

  it('refuses to boot without an authorisation hook unless public: true', async () => {
    expect(() => PgQueueDashboardModule.forRoot({ path: 'queues' })).toThrow(/PgQueueDashboardModule at "\/queues": no authorisation\. Pass auth: .*or public: true/);
    expect(() => PgQueueDashboardModule.forRoot({ path: 'queues', public: 'yes' as never })).toThrow(/option "public" must be true or false/);
    expect(() => PgQueueDashboardModule.forRoot({ path: 'queues', public: true, auth: () => 'full' })).toThrow(/option "public"/);
    // forRootAsync: the factory's options are checked when the app boots.
    const queue = PgQueueModule.forRoot({ connection: url, workers: false });
    await expect(startApp(url, { imports: [queue, PgQueueDashboardModule.forRootAsync({ path: 'queues', useFactory: () => ({ hidePayloads: true }) })] })).rejects.toThrow(/no authorisation/);
    // public: true in so many words boots.
    const app = await startApp(url, { imports: [PgQueueModule.forRoot({ connection: url, workers: false }), PgQueueDashboardModule.forRoot({ path: 'queues', public: true })] });
    await app.close();
  });
});
