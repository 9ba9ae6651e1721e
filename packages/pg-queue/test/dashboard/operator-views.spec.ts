import { Injectable, Module, type INestApplication, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { JobHandler, PgQueueModule, QueueService, type Job } from 'nestjs-pg-queue';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { formatSpan, formatTime } from '../../src/dashboard/views/format.js';
import { findChromium, launchChromium } from './support/browser.js';
import { startDashboardApp } from './support/dashboard-app.js';
import { sqlPool, waitFor } from '../support/test-app.js';

// What an operator opens the dashboard for (issue 23, items 1-3), in headless Chromium against a real database and a
// real worker process: a job's attempt history, the instances that run the queues (and the queue nobody runs), and
// why a queued job is not running. Each case asserts what the browser shows and what the tables hold.

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
const USERS = [{ name: 'admin', password: 'admin-password', access: 'full' as const }];
const REFRESH_MS = 1_000;
const WORKER = 'ops-worker-1';
const HOSTILE = '<img src=x onerror=alert(1)>';
const chromiumPath = findChromium();
const describeInBrowser = chromiumPath ? describe : describe.skip;

/** The 'ops-held' jobs that run now, each waiting for the test to release it. */
const held: (() => void)[] = [];

@Injectable()
class OperatorHandlers {
  /** Fails its first two attempts (each after about 300 ms), the second with a hostile error, then completes. */
  @JobHandler('ops-flaky', { maxAttempts: 3, backoff: { baseMs: 0, jitter: false } })
  async flaky(job: Job) {
    await new Promise((resolve) => setTimeout(resolve, 300));
    if (job.attempt === 1) throw new Error('upstream timed out\n    at fetchInvoice (invoices.ts:12)');
    if (job.attempt === 2) throw new Error(`bad reply ${HOSTILE}`);
    return { ok: true };
  }

  /** Runs until the test releases it. */
  @JobHandler('ops-held', { concurrency: 3 })
  async hold() {
    await new Promise<void>((resolve) => held.push(resolve));
  }

  @JobHandler('ops-paused', { concurrency: 2 })
  async paused() {
    return { ran: true };
  }
}

/** A process that runs workers, with its own workerId: the instance the dashboard lists. */
async function startWorker(url: string): Promise<INestApplicationContext> {
  @Module({
    imports: [PgQueueModule.forRoot({ connection: url, workerId: WORKER, pollIntervalMs: 200, leaseMs: 3_000, heartbeatMs: 300, maintenance: { enabled: false } })],
    providers: [OperatorHandlers],
  })
  class WorkerApp {}
  const app = await NestFactory.createApplicationContext(WorkerApp, { logger: ['error'], abortOnError: false });
  await app.init();
  return app;
}

describeInBrowser('what operators open the dashboard for, in headless Chromium', () => {
  let db: pg.Pool;
  let server: { app: INestApplication; baseUrl: string };
  let worker: INestApplicationContext;
  let queue: QueueService;
  let browser: Browser;
  let desk: BrowserContext;
  let dash: string;

  async function open(path: string): Promise<Page> {
    const page = await desk.newPage();
    const response = await page.goto(`${dash}${path}`);
    expect(response?.status()).toBe(200);
    return page;
  }

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const url = await createTestDatabase('dashoperator');
    db = sqlPool(url);
    // The dashboard's process runs no workers (it is no instance); the worker's process is the one it lists.
    server = await startDashboardApp(url, {
      adapter: 'express',
      dashboard: { path: 'admin/queues', auth: dashboardBasicAuth({ users: USERS }), csrfSecret: 'operator-secret-0123456789abcdef0123', refreshMs: REFRESH_MS },
      queue: { workers: false, maintenance: { enabled: false } },
      handlers: false,
    });
    dash = `${server.baseUrl}/admin/queues`;
    worker = await startWorker(url);
    queue = worker.get(QueueService);
    browser = await launchChromium(chromiumPath!);
    desk = await browser.newContext({ httpCredentials: { username: 'admin', password: 'admin-password' }, viewport: { width: 1280, height: 900 } });
  }, 120_000);

  afterAll(async () => {
    for (const release of held.splice(0)) release();
    await browser?.close();
    await worker?.close();
    await server?.app.close();
    await db?.end();
  });

  it('the page of a job that failed twice, then completed, shows each failed attempt as the table holds it: number, worker, start, duration, outcome, error (escaped)', async () => {
    const id = await queue.enqueue('ops-flaky', {});
    await queue.waitFor(id, { timeoutMs: 20_000 });
    const job = (await db.query<{ status: string; attempts: number; last_error: string }>('SELECT status::text, attempts, last_error FROM background_jobs WHERE id = $1', [id])).rows[0];
    expect(job).toMatchObject({ status: 'completed', attempts: 3 });
    const history = (
      await db.query<{ attempt: number; worker: string; started_at: Date; ms: number; outcome: string; error: string }>(
        `SELECT attempt, worker, started_at, (extract(epoch FROM finished_at - started_at) * 1000)::float8 AS ms, outcome, error
         FROM background_job_attempts WHERE job_id = $1 ORDER BY id`,
        [id],
      )
    ).rows;
    expect(history.map((h) => [h.attempt, h.worker, h.outcome, h.error.split('\n')[0]])).toEqual([
      [1, WORKER, 'failed', 'Error: upstream timed out'],
      [2, WORKER, 'failed', `Error: bad reply ${HOSTILE}`],
    ]);
    // Each attempt ran the handler's 300 ms, by the database clock.
    for (const h of history) expect(h.ms).toBeGreaterThanOrEqual(250);

    const page = await desk.newPage();
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    expect((await page.goto(`${dash}/jobs/${id}`))?.status()).toBe(200);
    await expect(page.locator('main .status').first().innerText()).resolves.toBe('completed');
    await expect(page.locator('dl.fields dt', { hasText: /^Attempts$/ }).locator('xpath=following-sibling::dd[1]').innerText()).resolves.toBe('3 of 3');
    const table = page.locator('table[data-field="attempts"]');
    await expect(table.locator('thead th').allInnerTexts()).resolves.toEqual(['attempt', 'worker', 'started', 'ran for', 'outcome', 'error']);
    const rows: string[][] = [];
    for (const tr of await table.locator('tbody tr').all()) rows.push((await tr.locator('td').allInnerTexts()).map((text) => text.trim()));
    expect(rows).toEqual(history.map((h) => [String(h.attempt), WORKER, formatTime(h.started_at), formatSpan(h.ms), 'failed', h.error.split('\n')[0]]));
    // The hostile error is text, in the cell and in its opened stack (the whole error), never an element; nothing ran.
    await expect(table.locator('img').count()).resolves.toBe(0);
    await expect(page.locator('main img').count()).resolves.toBe(0);
    // The whole error (its stack) opens from the first line (job logs, issue 43: stacks per attempt), as text.
    await expect(table.locator('tbody tr').nth(1).locator('td').last().locator('pre[data-field="attempt-error"]').textContent()).resolves.toBe(history[1].error);
    // The job's own error field is the last failed attempt's, kept after the completing one.
    await expect(page.locator('pre[data-field="last_error"]').innerText()).resolves.toBe(job.last_error);
    expect(job.last_error).toContain(HOSTILE);
    await page.screenshot({ path: `${ARTIFACTS}operator-job-attempts.png`, fullPage: true });
    expect(dialogs).toEqual([]);
    await page.close();
  });

  it('the Instances page lists the running instance with its queues and concurrency; the overview marks the queue nobody runs; a running job links its lease owner to it', async () => {
    const running = await queue.enqueue('ops-held', {});
    await waitFor('the held job running', async () => held.length === 1);
    await waitFor('running: 1 in the registry', async () => {
      const { rows } = await db.query<{ queues: { queue: string; running: number }[] }>('SELECT queues FROM background_instances WHERE id = $1', [WORKER]);
      return rows[0]?.queues.find((q) => q.queue === 'ops-held')?.running === 1;
    }, 5_000);
    // A process that died an hour ago with a handler for 'ops-nobody': gone, so it serves nothing. No live one has it.
    await db.query(`INSERT INTO background_instances (id, host, pid, queues, started_at, last_seen_at, expires_at)
      VALUES ('ops-crashed', 'old-host', 4242, '[{"queue":"ops-nobody","concurrency":1,"running":0}]', now() - interval '2 hours', now() - interval '50 minutes', now() - interval '49 minutes')`);
    const orphan = await queue.enqueue('ops-nobody', { n: 1 });

    const registry = (await db.query<{ id: string; host: string; pid: number; queues: { queue: string; concurrency: number; running: number }[]; live: boolean }>(
      `SELECT id, host, pid, queues, now() < expires_at AS live FROM background_instances ORDER BY id`,
    )).rows;
    expect(registry.map((r) => [r.id, r.live])).toEqual([['ops-crashed', false], [WORKER, true]]);
    const mine = registry.find((r) => r.id === WORKER)!;
    expect(mine).toMatchObject({ host: hostname(), pid: process.pid });
    expect(mine.queues.map((q) => q.queue).sort()).toEqual(['ops-flaky', 'ops-held', 'ops-paused']);
    expect(mine.queues.find((q) => q.queue === 'ops-held')).toMatchObject({ concurrency: 3, running: 1 });

    const page = await open('/instances');
    const row = page.locator(`tr[data-instance="${WORKER}"]`);
    await expect(row.getAttribute('class')).resolves.toBe('live');
    const cells = await row.locator('th, td').allInnerTexts();
    expect(cells[0]).toBe(WORKER);
    expect(cells[1]).toBe(hostname());
    expect(cells[2]).toBe(String(process.pid));
    expect(cells[6]).toBe('live');
    // Each of its queues, with what runs of its concurrency, as its row holds them.
    for (const q of mine.queues) {
      const link = row.locator(`a[data-queue="${q.queue}"]`);
      await expect(link.innerText()).resolves.toBe(q.queue);
      await expect(link.locator('xpath=following-sibling::span[1]').innerText()).resolves.toBe(`${q.running}/${q.concurrency} running`);
    }
    await expect(row.locator('a[data-queue="ops-held"] + span').innerText()).resolves.toBe('1/3 running');
    const gone = page.locator('tr[data-instance="ops-crashed"]');
    await expect(gone.getAttribute('class')).resolves.toBe('gone');
    await expect(gone.locator('td').last().innerText()).resolves.toMatch(/^gone \(stopped writing its row/);
    await expect(page.locator('p[data-unserved]').innerText()).resolves.toBe('Nobody runs this queue: ops-nobody (queued jobs, and no live instance has a handler for the queue).');
    await page.screenshot({ path: `${ARTIFACTS}operator-instances.png`, fullPage: true });

    // The overview: only the queue with queued jobs and no live instance is marked; the mark leads to the Instances page.
    await page.goto(`${dash}/`);
    const mark = page.locator('[data-unserved="ops-nobody"]');
    await expect(mark.innerText()).resolves.toBe('nobody runs this queue');
    await expect(page.locator('a[data-unserved]').count()).resolves.toBe(1);
    await expect(page.locator('[data-count="ops-nobody|due"]').innerText()).resolves.toBe('1');
    await Promise.all([page.waitForURL(`${dash}/instances`), mark.click()]);
    await expect(page.locator(`tr[data-instance="${WORKER}"]`).count()).resolves.toBe(1);

    // The running job's page: its lease owner is a link to that instance's row.
    const holder = (await db.query<{ status: string; locked_by: string }>('SELECT status::text, locked_by FROM background_jobs WHERE id = $1', [running])).rows[0];
    expect(holder).toEqual({ status: 'processing', locked_by: WORKER });
    await page.goto(`${dash}/jobs/${running}`);
    const owner = page.locator('dd[data-field="locked_by"] a');
    await expect(owner.innerText()).resolves.toBe(WORKER);
    await Promise.all([page.waitForURL(`${dash}/instances#instance-${WORKER}`), owner.click()]);
    await expect(page.locator(':target').getAttribute('data-instance')).resolves.toBe(WORKER);
    await expect(page.locator(':target').isVisible()).resolves.toBe(true);
    await page.close();

    held.shift()!();
    await queue.waitFor(running, { timeoutMs: 10_000 });
    await db.query(`UPDATE background_jobs SET status = 'cancelled', finished_at = now() WHERE id = $1`, [orphan]);
  });

  it('the page of a job of a paused queue says the pause holds it; resumed, the page (which follows it in place) shows it ran', async () => {
    await queue.pause('ops-paused');
    const id = await queue.enqueue('ops-paused', {});
    // Two polls and a heartbeat: a worker that serves the queue (registered, live) leaves it alone.
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect((await db.query('SELECT status::text, attempts FROM background_jobs WHERE id = $1', [id])).rows[0]).toEqual({ status: 'queued', attempts: 0 });
    expect((await db.query(`SELECT paused FROM background_queues WHERE queue_name = 'ops-paused'`)).rows[0]).toEqual({ paused: true });
    const said = await queue.whyNotRunning(id);
    expect(said!.reasons.map((r) => r.gate)).toEqual(['paused']);

    const page = await open(`/jobs/${id}`);
    await page.evaluate(() => ((globalThis as unknown as { stayed: boolean }).stayed = true));
    await expect(page.getByRole('heading', { name: 'Why it is not running', exact: true }).count()).resolves.toBe(1);
    const why = page.locator('ul[data-field="why"] li[data-gate]');
    await expect(why.evaluateAll((items) => items.map((li) => li.getAttribute('data-gate')))).resolves.toEqual(['paused']);
    await expect(why.allInnerTexts()).resolves.toEqual(said!.reasons.map((r) => r.reason));
    await expect(why.first().innerText()).resolves.toBe(`queue "ops-paused" is paused: resume it with the Resume button on the queue's page of the dashboard (or its overview), \`pg-queue resume ops-paused\`, or QueueService.resume()`);
    await page.screenshot({ path: `${ARTIFACTS}operator-job-why.png`, fullPage: true });

    // Resumed from the overview, in another tab.
    const overview = await open('/');
    const asked: string[] = [];
    overview.on('dialog', (dialog) => {
      asked.push(dialog.message());
      void dialog.accept();
    });
    await Promise.all([overview.waitForURL(/flash=/), overview.locator('tr[data-queue="ops-paused"]').getByRole('button', { name: 'Resume' }).click()]);
    expect(asked).toEqual(['Resume queue ops-paused?']);
    expect((await db.query(`SELECT paused FROM background_queues WHERE queue_name = 'ops-paused'`)).rows[0]).toEqual({ paused: false });
    await overview.close();

    await page.bringToFront();
    await page.locator('main .status', { hasText: 'completed' }).first().waitFor({ timeout: 10_000 });
    expect((await db.query('SELECT status::text, attempts, result FROM background_jobs WHERE id = $1', [id])).rows[0]).toEqual({ status: 'completed', attempts: 1, result: { ran: true } });
    await expect(page.locator('[data-field="why"]').count()).resolves.toBe(0);
    await expect(page.locator('dd[data-field="locked_by"]').innerText()).resolves.toBe(WORKER);
    await expect(page.evaluate(() => (globalThis as unknown as { stayed?: boolean }).stayed)).resolves.toBe(true);
    await page.close();
  });
});
