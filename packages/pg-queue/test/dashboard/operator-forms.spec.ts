import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { defineQueue, QueueService } from 'nestjs-pg-queue';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { ADMIN_USERS, findChromium, openPage, openViewers } from './support/browser.js';
import { startDashboardApp } from './support/dashboard-app.js';
import { measure } from './support/layout-checks.js';
import { sqlPool } from '../support/test-app.js';

// Issue 44, the dashboard's writing forms: add a job from scratch (and duplicate one with changes) through
// QueueService.enqueue, and edit a schedule through QueueService.upsertSchedule; asked first, CSRF-checked, a bad
// field or a refused payload answered with its reason and nothing stored; confirmed in the tables, at 1400 and 390 px.

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
const chromiumPath = findChromium();
const describeInBrowser = chromiumPath ? describe : describe.skip;

// A typed queue: its validator runs on the dashboard's enqueue as on an app's.
defineQueue<{ email: string }>('signups', { validate: (p) => (typeof (p as { email?: unknown }).email === 'string' ? true : 'email must be a string') });

interface JobRow {
  id: string;
  queue_name: string;
  payload: unknown;
  priority: number;
  max_attempts: number;
  unique_key: string | null;
  lifo: boolean | null;
  minutes: number;
}

describeInBrowser('the dashboard: add a job and edit a schedule, in headless Chromium', () => {
  let db: pg.Pool;
  let server: { app: INestApplication; baseUrl: string };
  let browser: Browser;
  let desk: BrowserContext;
  let phone: BrowserContext;
  let dash: string;

  const open = (context: BrowserContext, path: string): Promise<Page> => openPage(context, `${dash}${path}`);
  const jobs = async (queue: string) =>
    (
      await db.query<JobRow>(
        `SELECT id::text, queue_name, payload, priority, max_attempts, unique_key, lifo, round(extract(epoch FROM run_at - now()) / 60)::int AS minutes
         FROM background_jobs WHERE queue_name = $1 ORDER BY id`,
        [queue],
      )
    ).rows;
  /** Submits the page's form and accepts its question; returns the question asked. */
  const submit = async (page: Page, button: string): Promise<string[]> => {
    const asked: string[] = [];
    page.once('dialog', (dialog) => {
      asked.push(dialog.message());
      void dialog.accept();
    });
    await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: button }).click()]);
    return asked;
  };

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const url = await createTestDatabase('dashforms');
    db = sqlPool(url);
    server = await startDashboardApp(url, {
      adapter: 'express',
      dashboard: { path: 'admin/queues', auth: dashboardBasicAuth({ users: ADMIN_USERS }), csrfSecret: 'forms-secret-0123456789abcdef0123456789' },
      queue: { workers: false },
      handlers: false,
    });
    dash = `${server.baseUrl}/admin/queues`;
    await server.app.get(QueueService).upsertSchedule({ name: 'digest', cron: '0 8 * * *', queue: 'mail', payload: { kind: 'digest' } });
    ({ browser, desk, phone } = await openViewers(chromiumPath!));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.app.close();
    await db?.end();
  });

  it('adds a job from scratch after asking: queue, payload, priority, delay, unique key, max attempts, LIFO, as the row holds them', async () => {
    const page = await open(desk, '/jobs');
    await Promise.all([page.waitForNavigation(), page.locator('[data-add-job]').click()]);
    await page.fill('input[name="queue"]', 'signups');
    await page.fill('textarea[name="payload"]', '{"email":"ada@example.com"}');
    await page.fill('input[name="priority"]', '7');
    await page.fill('input[name="delaySeconds"]', '3600');
    await page.fill('input[name="uniqueKey"]', 'ada');
    await page.fill('input[name="maxAttempts"]', '3');
    await page.selectOption('select[name="lifo"]', '1');
    expect(await submit(page, 'Add job')).toEqual(['Add this job? It runs as any enqueued job does (a handler of its queue must serve it).']);
    const [row] = await jobs('signups');
    expect(row).toEqual({ id: row.id, queue_name: 'signups', payload: { email: 'ada@example.com' }, priority: 7, max_attempts: 3, unique_key: 'ada', lifo: true, minutes: 60 });
    await expect(page.locator('.flash').innerText()).resolves.toBe(`Job ${row.id} added to queue signups.`);
    // The same key again: no second job, said so.
    const again = await open(desk, '/jobs/new?queue=signups');
    await again.fill('textarea[name="payload"]', '{"email":"ada@example.com"}');
    await again.fill('input[name="uniqueKey"]', 'ada');
    await submit(again, 'Add job');
    await expect(again.locator('.flash').innerText()).resolves.toBe(`No job added: job ${row.id} holds the unique key.`);
    expect(await jobs('signups')).toHaveLength(1);
    await page.close();
    await again.close();
  });

  it.each([
    ['bad JSON', { queue: 'signups', payload: '{"email":' }, 'payload: not JSON'],
    ["the typed queue's validator refuses it", { queue: 'signups', payload: '{"email":42}' }, 'email must be a string'],
    ['a delay and a run-at time', { queue: 'other', payload: '{}', delaySeconds: '10', runAt: '2030-01-01T00:00:00Z' }, 'delaySeconds and runAt exclude each other'],
    ['a run-at time that is not one', { queue: 'other', payload: '{}', runAt: 'next tuesday' }, 'runAt: expected an ISO 8601 date-time, e.g. 2026-12-01T08:00:00Z'],
    ['onConflict without a unique key', { queue: 'other', payload: '{}', onConflict: 'replace' }, 'onConflict: only with a unique key'],
    ['a bad queue name', { queue: 'no spaces', payload: '{}' }, 'Invalid queue name "no spaces"'],
  ])('refuses %s with its reason (400) and stores nothing', async (_what, fields, reason) => {
    const count = async () => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n;
    const before = await count();
    const page = await open(desk, '/jobs/new');
    for (const [name, value] of Object.entries(fields)) {
      if (name === 'payload') await page.fill('textarea[name="payload"]', value);
      else if (name === 'onConflict') await page.selectOption('select[name="onConflict"]', value);
      else await page.fill(`input[name="${name}"]`, value);
    }
    page.once('dialog', (dialog) => void dialog.accept());
    const [response] = await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Add job' }).click()]);
    expect(response?.status()).toBe(400);
    await expect(page.locator('.error').innerText()).resolves.toContain(reason);
    expect(await count()).toBe(before);
    await page.close();
  });

  it('refuses a POST without the CSRF token (403), storing nothing', async () => {
    const response = await desk.request.post(`${dash}/jobs/new`, { form: { queue: 'forged', payload: '{}', confirmed: '1' } });
    expect(response.status()).toBe(403);
    expect(await jobs('forged')).toEqual([]);
  });

  it('duplicates a job with changes: the form filled from the job, a new row with the change', async () => {
    const [original] = await jobs('signups');
    const page = await open(desk, `/jobs/${original.id}`);
    await Promise.all([page.waitForNavigation(), page.locator('[data-duplicate-form]').click()]);
    await expect(page.locator('input[name="queue"]').inputValue()).resolves.toBe('signups');
    expect(JSON.parse(await page.locator('textarea[name="payload"]').inputValue())).toEqual({ email: 'ada@example.com' });
    await expect(page.locator('input[name="priority"]').inputValue()).resolves.toBe('7');
    await page.fill('input[name="priority"]', '1');
    await submit(page, 'Add job');
    const rows = await jobs('signups');
    expect(rows.map((r) => [r.payload, r.priority, r.max_attempts, r.unique_key])).toEqual([
      [{ email: 'ada@example.com' }, 7, 3, 'ada'],
      [{ email: 'ada@example.com' }, 1, 3, null],
    ]);
    await page.close();
  });

  it('edits a schedule after asking, through upsertSchedule: an interval instead of the cron, zone, payload, limit, dates, paused', async () => {
    const page = await open(desk, '/schedules');
    await Promise.all([page.waitForNavigation(), page.locator('tr[data-schedule="digest"] [data-edit-schedule]').click()]);
    await expect(page.locator('input[name="cron"]').inputValue()).resolves.toBe('0 8 * * *');
    await page.fill('input[name="cron"]', '');
    await page.fill('input[name="everySeconds"]', '900');
    await page.fill('input[name="timeZone"]', 'Europe/Paris');
    await page.fill('textarea[name="payload"]', '{"kind":"digest","for":"{{fireDate}}"}');
    await page.fill('input[name="limit"]', '10');
    await page.fill('input[name="startDate"]', '2030-01-01T08:00:00Z');
    await page.fill('input[name="endDate"]', '2030-02-01T08:00:00Z');
    await page.selectOption('select[name="paused"]', '1');
    const asked = await submit(page, 'Save');
    expect(asked[0]).toMatch(/^Change schedule digest\? /);
    const { rows } = await db.query(`SELECT cron, every_ms::int AS every_ms, time_zone, payload, fire_limit::int AS fire_limit, start_at, end_at, paused, queue_name FROM background_schedules WHERE name = 'digest'`);
    expect(rows).toEqual([
      { cron: null, every_ms: 900_000, time_zone: 'Europe/Paris', payload: { kind: 'digest', for: '{{fireDate}}' }, fire_limit: 10, start_at: new Date('2030-01-01T08:00:00Z'), end_at: new Date('2030-02-01T08:00:00Z'), paused: true, queue_name: 'mail' },
    ]);
    await expect(page.locator('.flash').innerText()).resolves.toMatch(/^Schedule digest saved: next fire 2030-01-01T08:00:00.000Z \(paused\)\.$/);
    await page.close();
  });

  it.each([
    ['a cron upsertSchedule refuses', { cron: 'every day', everySeconds: '' }, 'every day'],
    ['a cron and an interval', { cron: '0 8 * * *', everySeconds: '60' }, 'cron and every exclude each other'],
    ['an unknown time zone', { timeZone: 'Mars/Olympus' }, 'Mars/Olympus'],
    ['a payload that is not JSON', { payload: '{kind' }, 'payload: not JSON'],
  ])('refuses %s with its reason (400), the schedule as it was', async (_what, fields, reason) => {
    const read = async () => (await db.query(`SELECT * FROM background_schedules WHERE name = 'digest'`)).rows;
    const before = await read();
    const page = await open(desk, '/schedules/digest/edit');
    for (const [name, value] of Object.entries(fields)) await page.fill(name === 'payload' ? 'textarea[name="payload"]' : `input[name="${name}"]`, value);
    page.once('dialog', (dialog) => void dialog.accept());
    const [response] = await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Save' }).click()]);
    expect(response?.status()).toBe(400);
    await expect(page.locator('.error').innerText()).resolves.toContain(reason);
    expect(await read()).toEqual(before);
    await page.close();
  });

  for (const [screen, width] of [['desk', 1400], ['phone', 390]] as const) {
    it(`at ${width} px: the add-job and schedule forms fit the screen`, async () => {
      for (const [name, path] of [['add-job', '/jobs/new'], ['schedule-edit', '/schedules/digest/edit']]) {
        const page = await open(screen === 'desk' ? desk : phone, path);
        const seen = await measure(page);
        expect({ path, width: seen.page, wide: seen.wide, clipped: seen.clipped }).toEqual({ path, width, wide: [], clipped: [] });
        await page.screenshot({ path: `${ARTIFACTS}${name}-${screen}.png`, fullPage: true });
        await page.close();
      }
    });
  }
});
