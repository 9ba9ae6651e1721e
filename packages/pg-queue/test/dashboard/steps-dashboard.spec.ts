import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { startDashboardApp } from './support/dashboard-app.js';
import { sqlPool } from '../support/test-app.js';

// The job page's Steps block (durable steps) and Attempt history, over HTTP against a real database: what they show is
// what the tables hold, hostile names and results escaped, results and errors hidden with hidePayloads.
const USERS = [{ name: 'admin', password: 'admin-password', access: 'full' as const }];
const ADMIN = { authorization: `Basic ${Buffer.from('admin:admin-password').toString('base64')}` };
const HOSTILE = `<img src=x onerror=alert(1)>`;

describe('the dashboard: durable steps on the job page', () => {
  let db: pg.Pool;
  const apps: { app: INestApplication; baseUrl: string }[] = [];
  let id: string;
  let plain: string;

  beforeAll(async () => {
    const url = await createTestDatabase('dashboard_steps');
    db = sqlPool(url);
    for (const hidePayloads of [false, true]) {
      const dashboard = { path: 'admin/queues', auth: dashboardBasicAuth({ users: USERS }), hidePayloads };
      apps.push(await startDashboardApp(url, { adapter: 'express', dashboard, queue: { workers: false, maintenance: { enabled: false } }, handlers: false, logs: [] }));
    }
    const queue = apps[0].app.get(QueueService);
    id = await queue.enqueue('ds-order', {});
    plain = await queue.enqueue('ds-order', {});
    const steps = [
      { name: 'charge', result: { chargeId: 'ch_secret_1' }, attempt: 1, at: '2026-12-02T10:00:00.000Z' },
      { name: HOSTILE, result: HOSTILE, attempt: 2, at: '2026-12-02T10:00:01.000Z' },
      { name: 'wait', attempt: 2, at: '2026-12-02T10:00:02.000Z', until: '2026-12-02T11:00:02.000Z' },
    ];
    await db.query(`UPDATE background_jobs SET steps = $2, last_error = 'Error: second' WHERE id = $1`, [id, JSON.stringify(steps)]);
    // Two attempts that did not complete, as the failure statement and the sweeper record them.
    await db.query(
      `INSERT INTO background_job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error) VALUES
         ($1, 1, 'worker-a', '2026-12-02T09:00:00Z', '2026-12-02T09:00:01.5Z', 'failed', $2),
         ($1, 2, 'worker-b', '2026-12-02T09:10:00Z', '2026-12-02T09:10:30Z', 'lease-expired', 'lease expired: worker worker-b stopped renewing it')`,
      [id, `Error: card_secret_42 declined\n    at charge()`],
    );
  });
  afterAll(async () => {
    for (const { app } of apps) await app.close();
    await db?.end();
  });

  // The page's cells without what the phone layout and the viewer's zone add (labels, <time> around a time).
  const page = async (n: number, jobId: string) =>
    (await (await fetch(`${apps[n].baseUrl}/admin/queues/jobs/${jobId}`, { headers: ADMIN })).text()).replace(/ data-label="[^"]*"| class="full"/g, '').replace(/<time [^>]*>([^<]*)<\/time>/g, '$1');

  it('lists each step with its attempt, time and result, a sleep with its end, escaped; none for a job without steps', async () => {
    const body = await page(0, id);
    const table = body.slice(body.indexOf('<h2>Steps</h2>'), body.indexOf('</table>', body.indexOf('<h2>Steps</h2>')));
    expect(table).toContain('<td>charge</td><td>1</td>');
    expect(table).toContain('ch_secret_1');
    expect(table).toContain('&lt;img src=x onerror=alert(1)&gt;</td><td>2</td>');
    expect(body).not.toContain(HOSTILE);
    expect(table).toMatch(/<td>wait<\/td><td>2<\/td><td>[^<]+<\/td><td><span class="muted">sleep until [^<]+<\/span>/);
    expect(body).not.toMatch(/Other columns[\s\S]*steps/);
    expect(await page(0, plain)).not.toContain('<h2>Steps</h2>');
  });

  it('lists the attempt history: each attempt that did not complete, its worker, duration, outcome and error (first line, then its whole stack)', async () => {
    const body = await page(0, id);
    const table = body.slice(body.indexOf('<h2>Attempt history</h2>'), body.indexOf('</table>', body.indexOf('<h2>Attempt history</h2>')));
    expect(table).toMatch(
      /<td>1<\/td><td>worker-a<\/td><td>[^<]+<\/td><td>1\.5 s<\/td><td>failed<\/td><td><details class="stack"><summary>Error: card_secret_42 declined<\/summary><pre data-field="attempt-error">Error: card_secret_42 declined\n {4}at charge\(\)<\/pre><\/details>/,
    );
    expect(table).toMatch(/<td>2<\/td><td>worker-b<\/td><td>[^<]+<\/td><td>30\.0 s<\/td><td>lease-expired<\/td>/);
    expect(await page(0, plain)).not.toContain('Attempt history');
    const hidden = await page(1, id);
    expect(hidden).toContain('<h2>Attempt history</h2>');
    expect(hidden).not.toContain('card_secret_42');
  });

  it('hidePayloads hides the results, not the steps', async () => {
    const body = await page(1, id);
    expect(body).toContain('<td>charge</td><td>1</td>');
    expect(body).not.toContain('ch_secret_1');
    expect(body).toContain('hidden (hidePayloads)');
  });
});
