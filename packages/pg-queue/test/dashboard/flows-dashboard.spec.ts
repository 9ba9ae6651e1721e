import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { QueueService, type EnqueuedFlow } from 'nestjs-pg-queue';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { findChromium, launchChromium } from './support/browser.js';
import { startDashboardApp } from './support/dashboard-app.js';
import { sqlPool } from '../support/test-app.js';
import { DASHBOARD_EXACT_LIMIT } from '../../src/store/dashboard.store.js';

// The dashboard's flow pages over HTTP, against a real database: what they show is what the tables hold, and the
// Cancel flow action changes the rows. No workers run: the flows stay where the seeding (and the flow trigger, for
// the statuses written by SQL) left them.

const USERS = [
  { name: 'admin', password: 'admin-password', access: 'full' as const },
  { name: 'viewer', password: 'viewer-password', access: 'read-only' as const },
];
const PAGE_SIZE = 5;
const HOSTILE_NAME = `<script>alert("flow")</script> & 'quoted'`;
const HOSTILE_REF = `<img src=x onerror=alert(1)>`;
const BIG = 10_500;

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
const chromiumPath = findChromium();
const itInBrowser = chromiumPath ? it : it.skip;

const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });
const ADMIN = basic('admin', 'admin-password');

describe('the dashboard: flows', () => {
  let db: pg.Pool;
  let express: { app: INestApplication; baseUrl: string };
  let queue: QueueService;
  const logs: string[] = [];
  const flows: Record<'diamond' | 'hostile' | 'saga' | 'big' | 'done' | 'cancelled', EnqueuedFlow> = {} as never;
  const dash = () => `${express.baseUrl}/admin/queues`;

  async function get(path: string, headers: Record<string, string> = ADMIN): Promise<{ status: number; body: string; cookie: string | null }> {
    const response = await fetch(`${dash()}${path}`, { headers, redirect: 'manual' });
    return { status: response.status, body: await response.text(), cookie: response.headers.get('set-cookie') };
  }

  /** Every element of the page with `attribute`, as its value (in document order). */
  const values = (body: string, attribute: string) => [...body.matchAll(new RegExp(`${attribute}="([^"]*)"`, 'g'))].map((m) => m[1]);
  const flowRow = async (id: string) => (await db.query<{ status: string; reason: string | null }>('SELECT status, reason FROM background_flows WHERE id = $1', [id])).rows[0];
  const jobStatuses = async (flowId: string) =>
    Object.fromEntries((await db.query<{ ref: string; status: string }>('SELECT flow_ref AS ref, status::text FROM background_jobs WHERE flow_id = $1 ORDER BY id', [flowId])).rows.map((r) => [r.ref, r.status]));

  beforeAll(async () => {
    const url = await createTestDatabase('dashboard_flows');
    db = sqlPool(url);
    const dashboard = { path: 'admin/queues', auth: dashboardBasicAuth({ users: USERS }), pageSize: PAGE_SIZE };
    express = await startDashboardApp(url, { adapter: 'express', dashboard, queue: { workers: false, maintenance: { enabled: false } }, handlers: false, logs });
    queue = express.app.get(QueueService);
    const step = (ref: string, dependsOn?: string[]) => ({ ref, queue: 'fd-step', payload: { ref }, dependsOn });
    flows.diamond = await queue.enqueueFlow({ name: 'diamond', jobs: [step('top'), step('left', ['top']), step('right', ['top']), step('bottom', ['left', 'right'])] });
    flows.hostile = await queue.enqueueFlow({ name: HOSTILE_NAME, jobs: [step('first'), step('second', ['first'])] });
    // Refs are checked by enqueueFlow; the dashboard shows whatever the table holds, so one is made hostile by hand.
    await db.query('UPDATE background_jobs SET flow_ref = $1 WHERE id = $2', [HOSTILE_REF, flows.hostile.jobs.first]);
    flows.saga = await queue.enqueueFlow({
      name: 'saga',
      jobs: [{ ...step('pay'), compensate: { queue: 'fd-undo', payload: { refund: true } } }, step('ship', ['pay'])],
    });
    // pay completes, ship fails for good: the flow step starts the compensation of pay.
    await db.query(`UPDATE background_jobs SET status = 'completed', attempts = 1, finished_at = now() WHERE id = $1`, [flows.saga.jobs.pay]);
    await db.query(`SELECT pg_queue_flow_step(id, flow_id, flow_ref, compensates, 'processing', 'completed') FROM background_jobs WHERE id = $1`, [flows.saga.jobs.pay]); // the queue's statements take this step; raw SQL does not
    await db.query(`UPDATE background_jobs SET status = 'failed', attempts = 1, finished_at = now(), last_error = 'Error: courier <down>' WHERE id = $1`, [flows.saga.jobs.ship]);
    await db.query(`SELECT pg_queue_flow_step(id, flow_id, flow_ref, compensates, 'processing', 'failed') FROM background_jobs WHERE id = $1`, [flows.saga.jobs.ship]); // the queue's statements take this step; raw SQL does not
    // 10,000 jobs (enqueueFlow's most per call), and 500 more of the flow written by SQL: past every cap of the pages.
    flows.big = await queue.enqueueFlow({ name: 'big', jobs: [step('root'), ...Array.from({ length: 9_999 }, (_, i) => step(`part-${i}`, ['root']))] });
    await db.query(
      `INSERT INTO background_jobs (queue_name, payload, status, attempts, finished_at, flow_id, flow_ref)
       SELECT 'fd-step', '{}', 'completed', 1, now(), $1, 'extra-' || g FROM generate_series(1, 500) AS g`,
      [flows.big.id],
    );
    flows.done = await queue.enqueueFlow({ name: 'done', jobs: [step('only')] });
    await db.query(`UPDATE background_jobs SET status = 'completed', attempts = 1, finished_at = now() WHERE id = $1`, [flows.done.jobs.only]);
    await db.query(`SELECT pg_queue_flow_step(id, flow_id, flow_ref, compensates, 'processing', 'completed') FROM background_jobs WHERE id = $1`, [flows.done.jobs.only]); // the queue's statements take this step; raw SQL does not
    flows.cancelled = await queue.enqueueFlow({ name: 'cancelled', jobs: [step('only')] });
    await queue.cancelFlow(flows.cancelled.id);
  }, 120_000);

  afterAll(async () => {
    await express?.app.close();
    await db?.end();
  });

  it('the flows list: newest first, keyset pages, a status filter, linked from every page', async () => {
    const first = await get('/flows');
    expect(first.status).toBe(200);
    const all = (await db.query<{ id: string }>('SELECT f.id::text AS id FROM background_flows AS f ORDER BY f.id DESC')).rows.map((r) => r.id);
    expect(all).toHaveLength(6);
    expect(values(first.body, 'data-flow')).toEqual(all.slice(0, PAGE_SIZE));
    const older = /href="([^"]*)" rel="next">Older/.exec(first.body)![1].replaceAll('&amp;', '&');
    expect(older).toBe(`/admin/queues/flows?before=${all[PAGE_SIZE - 1]}`);
    expect(values((await get(older.slice('/admin/queues'.length))).body, 'data-flow')).toEqual(all.slice(PAGE_SIZE));
    // The statuses the flow rows hold, each a filter.
    const statuses = Object.fromEntries((await db.query<{ id: string; status: string }>('SELECT id::text, status FROM background_flows')).rows.map((r) => [r.id, r.status]));
    expect(statuses).toEqual({
      [flows.diamond.id]: 'running',
      [flows.hostile.id]: 'running',
      [flows.saga.id]: 'compensating',
      [flows.big.id]: 'running',
      [flows.done.id]: 'completed',
      [flows.cancelled.id]: 'cancelled',
    });
    for (const status of ['running', 'completed', 'cancelled', 'compensating', 'failed']) {
      const expected = all.filter((id) => statuses[id] === status).slice(0, PAGE_SIZE);
      expect([status, values((await get(`/flows?status=${status}`)).body, 'data-flow')]).toEqual([status, expected]);
    }
    // Job counts, the big flow's past the count's cap.
    const bigRow = new RegExp(`<tr data-flow="${flows.big.id}">[\\s\\S]*?</tr>`).exec(first.body)![0];
    expect(bigRow).toContain('over 10,000');
    expect(new RegExp(`<tr data-flow="${flows.diamond.id}">[\\s\\S]*?<td class="n" data-label="Jobs">4</td>`).test((await get(older.slice('/admin/queues'.length))).body)).toBe(true);
    // The navigation links to it, and marks it on its pages.
    expect((await get('')).body).toContain('<a href="/admin/queues/flows">Flows</a>');
    expect(first.body).toContain('<a href="/admin/queues/flows" aria-current="page">Flows</a>');
  });

  it('a flow page draws its DAG in layers (nodes linked to their jobs, coloured by status, blocked ones saying what they wait for) and lists its jobs', async () => {
    const { status, body } = await get(`/flows/${flows.diamond.id}`);
    expect(status).toBe(200);
    expect(body).toContain('<h1>Flow ' + flows.diamond.id + ': diamond</h1>');
    const j = flows.diamond.jobs;
    expect(values(body, 'data-node')).toEqual([j.top, j.left, j.right, j.bottom]);
    for (const id of Object.values(j)) expect(body).toContain(`<a href="/admin/queues/jobs/${id}" data-node="${id}">`);
    // Layers by depth, one column each: top in the first, left and right (one above the other) in the second, bottom in the third.
    const at = (id: string) => new RegExp(`data-node="${id}"><g[^>]*><title>[^<]*</title>\\s*<rect x="([0-9.]+)" y="([0-9.]+)"`).exec(body)!.slice(1).map(Number);
    expect([at(j.top), at(j.left), at(j.right), at(j.bottom)]).toEqual([[10, 10], [230, 10], [230, 66], [450, 10]]);
    // One path per edge; each node's colour is its job's status.
    expect(body.match(/<path class="edge open"/g)).toHaveLength(4);
    const classes = [...body.matchAll(/<g class="node ([^"]*)"/g)].map((m) => m[1]);
    expect(classes).toEqual(['st-queued', 'st-blocked', 'st-blocked', 'st-blocked']);
    expect(body).toContain(`<title>bottom (job ${j.bottom}) · queue fd-step · blocked · waiting for left, right</title>`);
    // The table: every job, what the blocked ones wait for.
    expect(values(body, 'data-job')).toEqual([j.top, j.left, j.right, j.bottom]);
    expect(body).toContain('No more jobs.');
    expect(new RegExp(`<tr data-job="${j.bottom}">[\\s\\S]*?waiting for left, right`).test(body)).toBe(true);
    expect(body).toMatch(/<span class="status status-blocked">blocked<\/span> 3/);
    // Unfinished: a Cancel flow button for a full-access user, none for a read-only one.
    expect(body).toContain(`action="/admin/queues/flows/${flows.diamond.id}/cancel"`);
    const readOnly = await get(`/flows/${flows.diamond.id}`, basic('viewer', 'viewer-password'));
    // No action (the header's "Pause live updates" is a plain button of the page's script, not a form's).
    expect(readOnly.body).not.toMatch(/<form method="post"|<button type="submit"/);
    // Finished flows have no Cancel.
    expect((await get(`/flows/${flows.done.id}`)).body).not.toContain('/cancel"');
  });

  it('a failed flow shows its reason and its compensation job, marked, undoing the job it compensates', async () => {
    const { body } = await get(`/flows/${flows.saga.id}`);
    const { rows } = await db.query<{ id: string; ref: string; status: string; compensates: string }>(
      `SELECT id::text, flow_ref AS ref, status::text, compensates::text FROM background_jobs WHERE flow_id = $1 AND compensates IS NOT NULL`,
      [flows.saga.id],
    );
    expect(rows).toEqual([{ id: expect.any(String), ref: 'compensate:pay', status: 'queued', compensates: flows.saga.jobs.pay }]);
    const [undo] = rows;
    expect(body).toContain(`<span class="status status-compensating">compensating</span>`);
    expect(body).toContain(`job ${flows.saga.jobs.ship} (ship) failed (<a href="/admin/queues/jobs/${flows.saga.jobs.ship}">job ${flows.saga.jobs.ship}</a>)`);
    expect(body).toContain(`<g class="node st-queued compensation"><title>compensate:pay (job ${undo.id}) · queue fd-undo · queued · compensates pay</title>`);
    expect(body).toContain('>↺ compensate:pay</text>');
    expect(new RegExp(`<tr data-job="${undo.id}">[\\s\\S]*?↺ undoes <a href="/admin/queues/jobs/${flows.saga.jobs.pay}">`).test(body)).toBe(true);
    // The failed job's error, escaped, in the table.
    expect(body).toContain('Error: courier &lt;down&gt;');
    // The compensation job's own page names the job it undoes.
    const job = await get(`/jobs/${undo.id}`);
    expect(job.body).toContain(`<dd data-field="compensates"><a href="/admin/queues/jobs/${flows.saga.jobs.pay}">job ${flows.saga.jobs.pay}</a>`);
  });

  it('a flow of 10,500 jobs draws 300 of them and says how many more, and pages its table', async () => {
    const started = Date.now();
    const { status, body } = await get(`/flows/${flows.big.id}`);
    expect(status).toBe(200);
    expect(Date.now() - started).toBeLessThan(5_000);
    const ids = (await db.query<{ id: string }>('SELECT j.id::text AS id FROM background_jobs AS j WHERE j.flow_id = $1 ORDER BY j.id', [flows.big.id])).rows.map((r) => r.id);
    expect(ids).toHaveLength(BIG);
    expect(values(body, 'data-node')).toEqual(ids.slice(0, 300));
    expect(body.match(/<path class="edge/g)).toHaveLength(299);
    expect(body).toContain('The first 300 jobs (by id) are drawn; over 9,700 more are in the table below.');
    expect(body).toContain('(counted over its first 10,000 jobs: more may be in each status)');
    // The table: a page of PAGE_SIZE jobs, then the next by id.
    expect(values(body, 'data-job')).toEqual(ids.slice(0, PAGE_SIZE));
    const next = /href="([^"]*)" rel="next">Next jobs/.exec(body)![1];
    expect(next).toBe(`/admin/queues/flows/${flows.big.id}?after=${ids[PAGE_SIZE - 1]}`);
    const second = await get(next.slice('/admin/queues'.length));
    expect(values(second.body, 'data-job')).toEqual(ids.slice(PAGE_SIZE, 2 * PAGE_SIZE));
    expect(values(second.body, 'data-node')).toEqual(ids.slice(0, 300)); // the drawing stays the flow's first jobs
    const last = await get(`/flows/${flows.big.id}?after=${ids.at(-2)}`);
    expect(values(last.body, 'data-job')).toEqual([ids.at(-1)]);
    expect(last.body).toContain('No more jobs.');
  });

  it('the job page of a flow job links its flow, names its ref, and says what a blocked job waits for', async () => {
    const blocked = await get(`/jobs/${flows.diamond.jobs.bottom}`);
    expect(blocked.body).toContain('<span class="status status-blocked">blocked</span> <span data-field="waiting_for">blocked: waiting for left, right</span>');
    expect(blocked.body).toContain(`<dd data-field="flow"><a href="/admin/queues/flows/${flows.diamond.id}">diamond</a> <span class="muted">(flow ${flows.diamond.id}, running)</span></dd>`);
    expect(blocked.body).toContain('<dd data-field="flow_ref">bottom</dd>');
    // A blocked job is neither cancelled nor deleted alone (its flow waits for it).
    expect(blocked.body).not.toContain('<button type="submit"');
    const top = await get(`/jobs/${flows.diamond.jobs.top}`);
    expect(top.body).not.toContain('data-field="waiting_for"');
    expect(top.body).toContain('<dd data-field="flow_ref">top</dd>');
    // A job enqueued alone has no flow fields.
    const alone = await queue.enqueue('fd-alone', { n: 1 });
    expect((await get(`/jobs/${alone}`)).body).not.toContain('data-field="flow"');
  });

  it('blocked shows wherever statuses do: the overview counts it, the jobs list filters by it (with no bulk action)', async () => {
    const overview = await get('');
    const { rows } = await db.query<{ queue_name: string; n: number }>(`SELECT queue_name, count(*)::int AS n FROM background_jobs WHERE status = 'blocked' GROUP BY 1`);
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      const shown = new RegExp(`data-count="${r.queue_name}\\|blocked"[^>]*>([^<]*)<`).exec(overview.body)![1];
      // The overview counts exactly up to DASHBOARD_EXACT_LIMIT per queue and status and estimates above (≈).
      expect([r.queue_name, r.n > DASHBOARD_EXACT_LIMIT ? shown.startsWith('≈') : Number(shown.replace(/,/g, ''))]).toEqual([r.queue_name, r.n > DASHBOARD_EXACT_LIMIT ? true : r.n]);
    }
    expect(overview.body).toMatch(/<th class="n"[^>]*>blocked<\/th>/);
    const list = await get('/jobs?queue=fd-step&status=blocked');
    expect(list.body).toContain('<option selected>blocked</option>');
    const expected = (await db.query<{ id: string }>(`SELECT j.id::text AS id FROM background_jobs AS j WHERE j.queue_name = 'fd-step' AND j.status = 'blocked' ORDER BY j.id DESC LIMIT ${PAGE_SIZE}`)).rows.map((r) => r.id);
    expect(values(list.body, 'data-job')).toEqual(expected);
    expect(list.body).not.toContain('class="bulk"');
  });

  it('escapes flow names and refs everywhere they show', async () => {
    const pages = [await get('/flows'), await get(`/flows/${flows.hostile.id}`), await get(`/jobs/${flows.hostile.jobs.second}`), await get(`/jobs/${flows.hostile.jobs.first}`)];
    for (const { status, body } of pages) {
      expect(status).toBe(200);
      expect(body).not.toMatch(/<script>alert|<img src=x/);
    }
    const [list, flow, second, first] = pages.map((p) => p.body);
    const name = '&lt;script&gt;alert(&quot;flow&quot;)&lt;/script&gt; &amp; &#39;quoted&#39;';
    const ref = '&lt;img src=x onerror=alert(1)&gt;';
    expect(list).toContain(`<a href="/admin/queues/flows/${flows.hostile.id}">${name}</a>`);
    expect(flow).toContain(`<h1>Flow ${flows.hostile.id}: ${name}</h1>`);
    expect(flow).toContain(`data-confirm="Cancel flow ${flows.hostile.id} (${name})?`);
    // The drawing cuts a long ref (its title has all of it), the table shows it whole.
    expect(flow).toContain(`<title>${ref} (job ${flows.hostile.jobs.first}) · queue fd-step · queued</title>`);
    expect(flow).toContain('&lt;img src=x onerror=…</text>');
    expect(flow).toContain(`waiting for ${ref}</title>`);
    expect(second).toContain(`blocked: waiting for ${ref}</span>`);
    expect(second).toContain(`>${name}</a>`);
    expect(first).toContain(`<dd data-field="flow_ref">${ref}</dd>`);
  });

  it('bad flow ids and filters answer 400 or 404, not 500', async () => {
    const statuses = await Promise.all(
      ['/flows?status=nope', '/flows?before=x', '/flows/abc', `/flows/${flows.big.id}?after=-1`, '/flows/9999999', '/flows/9999999999999999999'].map(async (path) => [path, (await get(path)).status]),
    );
    expect(statuses).toEqual([
      ['/flows?status=nope', 400], ['/flows?before=x', 400], ['/flows/abc', 400], [`/flows/${flows.big.id}?after=-1`, 400], ['/flows/9999999', 404], ['/flows/9999999999999999999', 404],
    ]);
  });

  itInBrowser('in a browser: the drawing shows every job with its tooltip, and Cancel flow asks with confirm() and cancels the flow', async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const browser = await launchChromium(chromiumPath!);
    try {
      const context = await browser.newContext({ httpCredentials: { username: 'admin', password: 'admin-password' }, viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      expect((await page.goto(`${dash()}/flows/${flows.saga.id}`))?.status()).toBe(200);
      await page.screenshot({ path: `${ARTIFACTS}flow-compensating.png`, fullPage: true });
      await page.goto(`${dash()}/flows/${flows.hostile.id}`);
      // Every node is drawn with a size (the SVG is laid out, not an empty box), and is a link.
      const boxes = await page.locator('.dag a[data-node] rect').evaluateAll((rects) => rects.map((r) => (r as unknown as { getBBox(): { width: number } }).getBBox().width));
      expect(boxes).toEqual([150, 150]);
      await expect(page.locator(`.dag a[data-node="${flows.hostile.jobs.second}"] title`).textContent()).resolves.toBe(
        `second (job ${flows.hostile.jobs.second}) · queue fd-step · blocked · waiting for ${HOSTILE_REF}`,
      );
      await page.screenshot({ path: `${ARTIFACTS}flow-hostile.png`, fullPage: true });
      const asked: string[] = [];
      page.on('dialog', (dialog) => {
        asked.push(dialog.message());
        void dialog.accept();
      });
      await Promise.all([page.waitForURL(/flash=/), page.getByRole('button', { name: 'Cancel flow' }).click()]);
      expect(asked).toEqual([`Cancel flow ${flows.hostile.id} (${HOSTILE_NAME})? Its queued and blocked jobs never run, its running ones are told to abort, and no compensation runs.`]);
      await expect(page.locator('.flash').innerText()).resolves.toBe(`Flow ${flows.hostile.id} cancelled: 2 jobs cancelled.`);
      expect(await flowRow(flows.hostile.id)).toEqual({ status: 'cancelled', reason: 'cancelled' });
      expect(Object.values(await jobStatuses(flows.hostile.id))).toEqual(['cancelled', 'cancelled']);
      await page.goto(`${dash()}/flows/${flows.big.id}`);
      await page.screenshot({ path: `${ARTIFACTS}flow-big.png` });
      // The picture of docs/dashboard.md: a flow under way (one job done, one running, one queued, one blocked).
      const order = await queue.enqueueFlow({
        name: 'order 1042',
        jobs: [
          { ref: 'reserve', queue: 'stock', payload: {}, compensate: { queue: 'stock-release', payload: {} } },
          { ref: 'charge', queue: 'payments', payload: {}, dependsOn: ['reserve'] },
          { ref: 'pack', queue: 'warehouse', payload: {}, dependsOn: ['reserve'] },
          { ref: 'ship', queue: 'shipping', payload: {}, dependsOn: ['charge', { ref: 'pack', onFailure: 'continue' }] },
          { ref: 'email', queue: 'emails', payload: {}, dependsOn: ['ship'] },
        ],
      });
      await db.query(`UPDATE background_jobs SET status = 'completed', attempts = 1, finished_at = now() WHERE id = $1`, [order.jobs.reserve]);
      await db.query(`SELECT pg_queue_flow_step(id, flow_id, flow_ref, compensates, 'processing', 'completed') FROM background_jobs WHERE id = $1`, [order.jobs.reserve]); // the queue's statements take this step; raw SQL does not
      await db.query(`UPDATE background_jobs SET status = 'processing', attempts = 1, locked_by = 'web-1:4242', locked_at = now(), lease_expires_at = now() + interval '30 s' WHERE id = $1`, [order.jobs.charge]);
      await page.goto(`${dash()}/flows/${order.id}`);
      await expect(page.locator('.dag a[data-node]').count()).resolves.toBe(5);
      await expect(page.locator('.pager').innerText()).resolves.toBe('No more jobs.'); // exactly a page of jobs: no "Next"
      await page.screenshot({ path: `${ARTIFACTS}flow.png`, fullPage: true });
    } finally {
      await browser.close();
    }
  }, 60_000);

  it('Cancel flow: asks first (without JavaScript, a confirmation page), then cancels every job that could still run and the flow, logged', async () => {
    const page = await get(`/flows/${flows.diamond.id}`);
    const cookie = page.cookie!.split(';')[0];
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)![1];
    const post = (fields: Record<string, string>, headers: Record<string, string> = ADMIN) =>
      fetch(`${dash()}/flows/${flows.diamond.id}/cancel`, { method: 'POST', redirect: 'manual', headers: { ...headers, cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields) });

    // Without the CSRF token, or as a read-only user: refused, nothing changed.
    expect((await post({ confirmed: '1' })).status).toBe(403);
    expect((await post({ confirmed: '1', _csrf: csrf }, basic('viewer', 'viewer-password'))).status).toBe(403);
    // Unconfirmed: the question, nothing changed.
    const asked = await post({ _csrf: csrf, return: `/admin/queues/flows/${flows.diamond.id}` });
    expect(asked.status).toBe(200);
    expect(await asked.text()).toContain(`<p class="confirm-question">Cancel flow ${flows.diamond.id}? Its queued and blocked jobs never run, its running ones are told to abort, and no compensation runs.</p>`);
    expect(await flowRow(flows.diamond.id)).toEqual({ status: 'running', reason: null });

    const done = await post({ _csrf: csrf, confirmed: '1', return: `/admin/queues/flows/${flows.diamond.id}` });
    expect(done.status).toBe(303);
    const location = new URL(done.headers.get('location')!, 'http://x');
    expect(location.pathname).toBe(`/admin/queues/flows/${flows.diamond.id}`);
    expect(location.searchParams.get('flash')).toBe(`Flow ${flows.diamond.id} cancelled: 4 jobs cancelled.`);
    expect(await flowRow(flows.diamond.id)).toEqual({ status: 'cancelled', reason: 'cancelled' });
    expect(await jobStatuses(flows.diamond.id)).toEqual({ top: 'cancelled', left: 'cancelled', right: 'cancelled', bottom: 'cancelled' });
    expect(logs).toContain(`user "admin" cancelled flow ${flows.diamond.id} (4 jobs cancelled, 0 running ones told to abort)`);

    // The page after the redirect: the flash, the cancelled flow, no Cancel button.
    const after = await get(`${location.pathname.slice('/admin/queues'.length)}${location.search}`);
    expect(after.body).toContain(`<p class="flash" role="status">Flow ${flows.diamond.id} cancelled: 4 jobs cancelled.</p>`);
    expect(after.body).not.toContain('/cancel"');
    expect([...after.body.matchAll(/<g class="node ([^"]*)"/g)].map((m) => m[1])).toEqual(['st-cancelled', 'st-cancelled', 'st-cancelled', 'st-cancelled']);
    // Again: nothing to cancel, and the rows stay as they are.
    const again = await post({ _csrf: csrf, confirmed: '1' });
    expect(new URL(again.headers.get('location')!, 'http://x').searchParams.get('flash')).toBe(`Flow ${flows.diamond.id}: nothing to cancel (it had finished, or it is gone).`);
  });
});
