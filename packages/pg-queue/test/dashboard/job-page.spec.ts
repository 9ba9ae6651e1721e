import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { QueueService } from 'nestjs-pg-queue';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { ADMIN_USERS, findChromium, openPage, openViewers } from './support/browser.js';
import { startDashboardApp } from './support/dashboard-app.js';
import { measure } from './support/layout-checks.js';
import { sqlPool } from '../support/test-app.js';

// Issue 44, the job page: the attempt history split by run (a retry starts at attempt 1 again), progress given as
// { percent } drawn as a bar, a durable sleep named as such (on the page and in whyNotRunning, which `jobs why`
// prints), where to resume a paused queue, and Duplicate (a copy enqueued, asked first, confirmed in the table).

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
const chromiumPath = findChromium();
const describeInBrowser = chromiumPath ? describe : describe.skip;

describeInBrowser('the dashboard: the job page, in headless Chromium', () => {
  let db: pg.Pool;
  let server: { app: INestApplication; baseUrl: string };
  let browser: Browser;
  let desk: BrowserContext;
  let phone: BrowserContext;
  let dash: string;
  let retried: string;
  let sleeper: string;
  let paused: string;

  const open = (context: BrowserContext, path: string): Promise<Page> => openPage(context, `${dash}${path}`);
  const insert = async (sql: string, values: unknown[] = []) => (await db.query<{ id: string }>(`${sql} RETURNING id::text AS id`, values)).rows[0].id;

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const url = await createTestDatabase('dashjobpage');
    db = sqlPool(url);
    server = await startDashboardApp(url, {
      adapter: 'express',
      dashboard: { path: 'admin/queues', auth: dashboardBasicAuth({ users: ADMIN_USERS }), csrfSecret: 'job-page-secret-0123456789abcdef0123', refreshMs: 1_000 },
      handlers: false,
    });
    dash = `${server.baseUrl}/admin/queues`;
    // A job that failed three times, was retried, failed twice more and then completed, with 40 % progress.
    retried = await insert(`INSERT INTO background_jobs (queue_name, payload, status, attempts, max_attempts, priority, locked_at, finished_at, progress, last_error)
      VALUES ('exports', '{"export": "march"}', 'completed', 3, 3, 7, now() - interval '1 minute', now() - interval '50 seconds', '{"percent": 40}', 'Error: disk full')`);
    await db.query(`INSERT INTO background_job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error)
      SELECT $1, a, 'worker-' || n, now() - (20 - n) * interval '1 minute', now() - (20 - n) * interval '1 minute' + interval '2 seconds', 'failed', 'Error: disk full (run ' || r || ')'
      FROM (VALUES (1, 1, 1), (2, 1, 2), (3, 1, 3), (4, 2, 1), (5, 2, 2)) AS v(n, r, a)`, [retried]);
    // A job in its durable sleep "cool-down": the step recorded, the row snoozed until the sleep's end.
    sleeper = await insert(`INSERT INTO background_jobs (queue_name, payload, attempts, fence_token, run_at, steps)
      VALUES ('exports', '{"export": "april"}', 1, 1, now() + interval '1 hour',
              jsonb_build_array(jsonb_build_object('name', 'fetch', 'result', 1, 'attempt', 1, 'at', now()), jsonb_build_object('name', 'cool-down', 'attempt', 1, 'at', now(), 'until', now() + interval '1 hour')))`);
    paused = await insert(`INSERT INTO background_jobs (queue_name, payload) VALUES ('held', '{"n": 1}')`);
    await server.app.get(QueueService).pause('held');
    ({ browser, desk, phone } = await openViewers(chromiumPath!));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.app.close();
    await db?.end();
  });

  it('splits the attempt history by run: a retry starts again at attempt 1 under its own heading', async () => {
    const page = await open(desk, `/jobs/${retried}`);
    const table = page.locator('table[data-field="attempts"]');
    const rows = await table.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => (tr.getAttribute('data-run') ? `run ${tr.getAttribute('data-run')}` : (tr.querySelector('td') as { textContent: string } | null)?.textContent ?? '')));
    expect(rows).toEqual(['run 1', '1', '2', '3', 'run 2', '1', '2']);
    await expect(table.locator('tr[data-run="2"]').innerText()).resolves.toBe('Run 2 (after a retry)');
    const stored = (await db.query<{ attempt: number }>('SELECT attempt FROM background_job_attempts WHERE job_id = $1 ORDER BY id', [retried])).rows.map((r) => String(r.attempt));
    expect(rows.filter((r) => !r.startsWith('run'))).toEqual(stored);
    // { percent: 40 } is a bar, not JSON.
    await expect(page.locator('[data-field="progress-bar"]').innerText()).resolves.toBe('40 %');
    await expect(page.locator('[data-field="progress-bar"] progress').getAttribute('value')).resolves.toBe('40');
    await page.screenshot({ path: `${ARTIFACTS}job-runs.png`, fullPage: true });
    await page.close();
  });

  it('names a durable sleep as such, on the page and in whyNotRunning (what `pg-queue jobs why` prints)', async () => {
    const said = await server.app.get(QueueService).whyNotRunning(sleeper);
    expect(said!.reasons.map((r) => r.gate)).toContain('sleeping');
    expect(said!.reasons.find((r) => r.gate === 'sleeping')!.reason).toMatch(/^in its durable sleep "cool-down" \(job\.sleep\(\)\) until /);
    const page = await open(desk, `/jobs/${sleeper}`);
    await expect(page.locator('main p .status').first().innerText()).resolves.toBe('sleeping');
    await expect(page.locator('ul[data-field="why"] li[data-gate="sleeping"]').innerText()).resolves.toContain('durable sleep "cool-down"');
    await page.close();
  });

  it("says where a paused queue's Resume button is, and the link leads to it", async () => {
    const page = await open(desk, `/jobs/${paused}`);
    await expect(page.locator('li[data-gate="paused"]').innerText()).resolves.toContain('`pg-queue resume held`');
    await Promise.all([page.waitForURL(/\/queues\/held$/), page.locator('[data-field="resume-where"] a').click()]);
    await expect(page.locator('[data-field="queue-state"]').getByRole('button', { name: 'Resume' }).count()).resolves.toBe(1);
    await page.close();
  });

  it('duplicates a job after asking: a new row of the same queue, payload, priority and attempts', async () => {
    const page = await open(desk, `/jobs/${retried}`);
    const asked: string[] = [];
    page.on('dialog', (dialog) => {
      asked.push(dialog.message());
      void dialog.accept();
    });
    await Promise.all([page.waitForURL(/flash=/), page.getByRole('button', { name: 'Duplicate' }).click()]);
    expect(asked).toEqual([`Enqueue a copy of job ${retried} (same queue, payload, priority and max attempts, due now)?`]);
    const { rows } = await db.query<{ id: string; queue_name: string; payload: unknown; priority: number; max_attempts: number; status: string; attempts: number }>(
      `SELECT id::text AS id, queue_name, payload, priority, max_attempts, status::text AS status, attempts FROM background_jobs WHERE id > $1 AND queue_name = 'exports' ORDER BY id`,
      [paused],
    );
    expect(rows).toEqual([{ id: rows[0].id, queue_name: 'exports', payload: { export: 'march' }, priority: 7, max_attempts: 3, status: 'queued', attempts: 0 }]);
    await expect(page.locator('.flash').innerText()).resolves.toBe(`Job ${retried} duplicated: the copy is job ${rows[0].id}.`);
    await page.close();
  });

  for (const [screen, width] of [['desk', 1400], ['phone', 390]] as const) {
    it(`at ${width} px: nothing wider than the screen and no clipped text in tables`, async () => {
      for (const id of [retried, sleeper]) {
        const page = await open(screen === 'desk' ? desk : phone, `/jobs/${id}`);
        const seen = await measure(page);
        expect({ id, width: seen.page, wide: seen.wide, clipped: seen.clipped }).toEqual({ id, width, wide: [], clipped: [] });
        await page.screenshot({ path: `${ARTIFACTS}job-${screen}-${id === retried ? 'runs' : 'sleeping'}.png`, fullPage: true });
        await page.close();
      }
    });
  }
});
