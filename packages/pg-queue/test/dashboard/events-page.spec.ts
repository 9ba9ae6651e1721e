import { Injectable, type INestApplication } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { JobHandler, QueueService } from 'nestjs-pg-queue';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { findChromium, openPage, openViewers } from './support/browser.js';
import { flaky, startDashboardApp } from './support/dashboard-app.js';
import { measure } from './support/layout-checks.js';
import { sqlPool, waitFor } from '../support/test-app.js';

// Issue 43 in the dashboard: the recorded event stream as a page (newest first, filtered, paged by event id, each event
// linking to its job), a job's events on its page, and the queue page's switch for recording; issue 42 part 2: the
// weights editor of a fair queue. Every switch asks first, refuses read-only users and a missing CSRF token, and is
// checked in the tables it changes; pages are checked against background_job_events, at 1400 and 390 px.

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
const SECRET = 'events-secret-0123456789abcdef0123456789';
const USERS = [
  { name: 'admin', password: 'admin-password', access: 'full' as const },
  { name: 'viewer', password: 'viewer-password', access: 'read-only' as const },
];
const HOSTILE = '<img src=x onerror=alert(1)>';
const PAGE_SIZE = 3;
const chromiumPath = findChromium();
const describeInBrowser = chromiumPath ? describe : describe.skip;

@Injectable()
class FairHandler {
  @JobHandler('tenants', { fairness: { defaultWeight: 2, weights: { big: 1 } } })
  async run() {
    return null;
  }
}

interface EventRow {
  id: string;
  type: string;
  job_id: string | null;
}

describeInBrowser('the dashboard: the event stream and fair share weights, in headless Chromium', () => {
  let db: pg.Pool;
  let server: { app: INestApplication; baseUrl: string };
  let hidden: { app: INestApplication; baseUrl: string };
  let browser: Browser;
  let desk: BrowserContext;
  let phone: BrowserContext;
  let viewer: BrowserContext;
  let dash: string;
  let failedId: string;

  const open = (context: BrowserContext, path: string): Promise<Page> => openPage(context, `${dash}${path}`);
  /** The events as the table holds them, newest first (the page's order), with their stream ids. */
  const events = async (where = 'true', limit = 1000): Promise<EventRow[]> =>
    (await db.query<EventRow>(`SELECT tx::text || '-' || id::text AS id, type, job_id::text AS job_id FROM background_job_events WHERE ${where} ORDER BY tx DESC, id DESC LIMIT ${limit}`)).rows;
  const shown = (page: Page) => page.locator('tr[data-event]').evaluateAll((rows) => rows.map((r) => (r as unknown as { dataset: { event: string; type: string } }).dataset).map((d) => [d.event, d.type]));
  const recording = async (queue: string) => (await db.query<{ record_events: boolean }>(`SELECT record_events FROM background_queues WHERE queue_name = $1`, [queue])).rows[0]?.record_events ?? false;
  const weights = async () => (await db.query<{ key: string; weight: number }>(`SELECT key, weight FROM background_queue_weights WHERE queue_name = 'tenants' ORDER BY key`)).rows;
  /** Submits with the button and accepts the question; returns the question asked. */
  const submit = async (page: Page, button: string): Promise<string[]> => {
    const asked: string[] = [];
    page.once('dialog', (dialog) => {
      asked.push(dialog.message());
      void dialog.accept();
    });
    await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: button }).first().click()]);
    return asked;
  };
  /** A POST from the viewer's page with its own valid CSRF token: only the access level stands in the way. */
  const forged = async (path: string, fields: Record<string, string>) => {
    const page = await openPage(viewer, `${dash}/`);
    const nonce = (await viewer.cookies()).find((c) => c.name === 'pgq_dashboard_csrf')!.value;
    const token = createHmac('sha256', SECRET).update(nonce).digest('base64url');
    const status = await page.evaluate(
      async ([url, body]) => (await fetch(url, { method: 'POST', body: new URLSearchParams(body) })).status,
      [`${dash}${path}`, { ...fields, _csrf: token, confirmed: '1' }] as const,
    );
    await page.close();
    return status;
  };

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const url = await createTestDatabase('dashevents');
    db = sqlPool(url);
    const dashboard = { path: 'admin/queues', auth: dashboardBasicAuth({ users: USERS }), csrfSecret: SECRET, pageSize: PAGE_SIZE };
    server = await startDashboardApp(url, { adapter: 'express', dashboard, providers: [FairHandler] });
    hidden = await startDashboardApp(url, { adapter: 'express', dashboard: { ...dashboard, hidePayloads: true }, queue: { workers: false }, handlers: false });
    dash = `${server.baseUrl}/admin/queues`;
    ({ browser, desk, phone } = await openViewers(chromiumPath!));
    viewer = await browser.newContext({ httpCredentials: { username: 'viewer', password: 'viewer-password' }, viewport: { width: 1400, height: 900 } });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await hidden?.app.close();
    await server?.app.close();
    await db?.end();
  });

  it('turns recording on from the queue page after asking: background_queues and the triggers say so', async () => {
    const page = await open(desk, '/queues/flaky');
    await expect(page.locator('[data-field="records-events"]').getAttribute('data-recording')).resolves.toBe('no');
    const asked = await submit(page, 'Record events');
    expect(asked[0]).toMatch(/^Record the events of queue flaky\? /);
    expect(await recording('flaky')).toBe(true);
    const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_trigger WHERE tgrelid = 'background_jobs'::regclass AND tgname LIKE 'background_jobs_events_%'`);
    expect(rows[0].n).toBe(3);
    await expect(page.locator('[data-field="records-events"]').getAttribute('data-recording')).resolves.toBe('yes');
    await expect(page.locator('.flash').innerText()).resolves.toBe('Queue flaky records events (recording: flaky).');
    await page.close();
  });

  it('lists the events newest first as the table holds them, escaped, filtered by type and queue, paged by event id', async () => {
    const queue = server.app.get(QueueService);
    flaky.fail = true;
    failedId = await queue.enqueue('flaky', { n: HOSTILE });
    await waitFor('the failed job to be dead', async () => (await events(`job_id = ${failedId} AND type = 'dead'`)).length === 1);
    flaky.fail = false;
    const doneId = await queue.enqueue('flaky', { n: 2 });
    await waitFor('the second job to complete', async () => (await events(`job_id = ${doneId} AND type = 'completed'`)).length === 1);
    expect((await events(`job_id = ${failedId}`)).map((e) => e.type).reverse()).toEqual(['enqueued', 'started', 'failed', 'dead']);

    const page = await open(desk, '/events');
    const all = await events();
    expect(await shown(page)).toEqual(all.slice(0, PAGE_SIZE).map((e) => [e.id, e.type]));
    // Older, then Newer again: the pages follow the table's (tx, id) order.
    await Promise.all([page.waitForNavigation(), page.locator('[data-page="older"]').click()]);
    expect(await shown(page)).toEqual(all.slice(PAGE_SIZE, 2 * PAGE_SIZE).map((e) => [e.id, e.type]));
    await Promise.all([page.waitForNavigation(), page.locator('[data-page="newer"]').click()]);
    expect(await shown(page)).toEqual(all.slice(0, PAGE_SIZE).map((e) => [e.id, e.type]));

    // The dead event's error holds the payload's hostile text: shown as text, no element made of it.
    await page.goto(`${dash}/events?type=dead`);
    const dead = await events(`type = 'dead'`);
    expect(await shown(page)).toEqual(dead.map((e) => [e.id, e.type]));
    await expect(page.locator(`tr[data-event="${dead[0].id}"] td[data-label="detail"]`).innerText()).resolves.toContain(`upstream refused job ${failedId} (n=${HOSTILE})`);
    await expect(page.locator('main img').count()).resolves.toBe(0);
    // Each event links to its job.
    await Promise.all([page.waitForNavigation(), page.locator(`tr[data-event="${dead[0].id}"] a[href$="/jobs/${failedId}"]`).click()]);
    expect(new URL(page.url()).pathname).toBe(`/admin/queues/jobs/${failedId}`);

    await page.goto(`${dash}/events?queue=nobody`);
    await expect(page.locator('tr[data-event]').count()).resolves.toBe(0);
    const bad = await page.goto(`${dash}/events?before=12-x`);
    expect(bad?.status()).toBe(400);
    await page.close();
  });

  it("shows a job's events on its page, oldest first, as the table holds them; hidePayloads hides the errors", async () => {
    const page = await open(desk, `/jobs/${failedId}`);
    const mine = (await events(`job_id = ${failedId}`)).reverse();
    expect(await shown(page)).toEqual(mine.map((e) => [e.id, e.type]));
    await page.close();
    for (const path of [`/jobs/${failedId}`, '/events?type=dead']) {
      const hid = await openPage(desk, `${hidden.baseUrl}/admin/queues${path}`);
      await expect(hid.locator(`tr[data-type="dead"] td[data-label="detail"]`).first().innerText()).resolves.toBe('hidden (hidePayloads)');
      expect(await hid.content()).not.toContain('upstream refused');
      await hid.close();
    }
  });

  it("edits a fair queue's weights after asking: the default weight shown, a key set and removed in background_queue_weights", async () => {
    const page = await open(desk, '/queues/tenants');
    await expect(page.locator('[data-field="default-weight"]').innerText()).resolves.toMatch(/weighs 2 \(the fairness option\); the option's weights: big 1\./);
    await page.fill('form[data-weights-form] input[name="weightKey"]', 'acme <b>');
    await page.fill('form[data-weights-form] input[name="weight"]', '5');
    const asked = await submit(page, 'Set weight');
    expect(asked[0]).toBe("Store this weight for queue tenants? Every process's next fair claim shares by it.");
    expect(await weights()).toEqual([{ key: 'acme <b>', weight: 5 }]);
    await expect(page.locator('tr[data-weight-key="acme <b>"] td[data-label="weight"]').innerText()).resolves.toBe('5');
    // Out of range: QueueService refuses it, 400 with the reason, nothing stored.
    await page.fill('form[data-weights-form] input[name="weightKey"]', 'acme <b>');
    await page.fill('form[data-weights-form] input[name="weight"]', '1001');
    page.once('dialog', (dialog) => void dialog.accept());
    const [response] = await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Set weight' }).click()]);
    expect(response?.status()).toBe(400);
    expect(await weights()).toEqual([{ key: 'acme <b>', weight: 5 }]);
    await page.goto(`${dash}/queues/tenants`);
    const removal = await submit(page, 'Remove');
    expect(removal[0]).toBe("Remove the stored weight of key acme <b> in queue tenants? It weighs what the fairness option says again, from every process's next claim.");
    expect(await weights()).toEqual([]);
    await page.close();
  });

  it('refuses the switches to a read-only user (no form, a forged POST 403) and to a POST without the CSRF token', async () => {
    await server.app.get(QueueService).setFairnessWeights('tenants', { kept: 3 });
    for (const path of ['/queues/flaky', '/queues/tenants']) {
      const page = await openPage(viewer, `${dash}${path}`);
      await expect(page.locator('form[method="post"]').count()).resolves.toBe(0);
      await page.close();
    }
    expect(await forged('/queues/flaky/stop-events', {})).toBe(403);
    expect(await forged('/queues/tenants/weights', { weightKey: 'kept', weight: 'default' })).toBe(403);
    const noToken = await desk.request.post(`${dash}/queues/flaky/stop-events`, { form: { confirmed: '1' } });
    expect(noToken.status()).toBe(403);
    expect(await recording('flaky')).toBe(true);
    expect(await weights()).toEqual([{ key: 'kept', weight: 3 }]);
  });

  for (const [screen, width] of [['desk', 1400], ['phone', 390]] as const) {
    it(`at ${width} px: the events, queue and job pages fit the screen`, async () => {
      for (const [name, path] of [['events', '/events'], ['queue-events', '/queues/flaky'], ['queue-weights', '/queues/tenants'], ['job-events', `/jobs/${failedId}`]]) {
        const page = await open(screen === 'desk' ? desk : phone, path);
        const seen = await measure(page);
        expect({ path, width: seen.page, wide: seen.wide, clipped: seen.clipped }).toEqual({ path, width, wide: [], clipped: [] });
        await page.screenshot({ path: `${ARTIFACTS}${name}-${screen}.png`, fullPage: true });
        await page.close();
      }
    });
  }

  it('turns recording off after asking: the queue no longer records, and with no recording queue no trigger is left', async () => {
    const page = await open(desk, '/queues/flaky');
    const asked = await submit(page, 'Stop recording events');
    expect(asked[0]).toMatch(/^Stop recording the events of queue flaky\? /);
    expect(await recording('flaky')).toBe(false);
    const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_trigger WHERE tgname LIKE 'background_%_events%'`);
    expect(rows[0].n).toBe(0);
    const before = (await events()).length;
    await server.app.get(QueueService).enqueue('flaky', { n: 3 });
    await page.goto(`${dash}/jobs?queue=flaky`);
    expect((await events()).length).toBe(before);
    await page.close();
  });
});
