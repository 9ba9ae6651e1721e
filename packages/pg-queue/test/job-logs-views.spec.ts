import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { startDashboardApp } from './dashboard/support/dashboard-app.js';
import { buildCli, runCli } from './support/run-cli.js';
import { sqlPool } from './support/test-app.js';

// Job logs and whole error stacks where people read them (README: "Job logs", "Attempt history"): the dashboard's job
// page and `pg-queue jobs show`. The rows are written as the statements write them; what the page and the command show
// is asserted against them: per attempt, escaped for HTML and for the terminal, hidden with hidePayloads.
const USERS = [{ name: 'admin', password: 'admin-password', access: 'full' as const }];
const ADMIN = { authorization: `Basic ${Buffer.from('admin:admin-password').toString('base64')}` };
const HTML = `<script>alert('logged')</script>`;
const ANSI = '\u001b[31mred\u001b[0m and \u001b]52;c;Y2xpcGJvYXJk\u0007';
const STACK = `Error: card_secret_42 declined\n    at charge (/app/billing.js:10:5)\nCaused by: Error: gateway timeout ${HTML}\n    at post (/app/gateway.js:3:1)`;

describe('job logs on the job page and in pg-queue jobs show', () => {
  let url: string;
  let db: pg.Pool;
  const apps: { app: INestApplication; baseUrl: string }[] = [];
  let id: string;
  let quiet: string;

  beforeAll(async () => {
    const built = buildCli();
    url = await createTestDatabase('job_logs_views');
    db = sqlPool(url);
    for (const hidePayloads of [false, true]) {
      const dashboard = { path: 'admin/queues', auth: dashboardBasicAuth({ users: USERS }), hidePayloads };
      apps.push(await startDashboardApp(url, { adapter: 'express', dashboard, queue: { workers: false, maintenance: { enabled: false } }, handlers: false, logs: [] }));
    }
    const queue = apps[0].app.get(QueueService);
    id = await queue.enqueue('jl-views', {});
    quiet = await queue.enqueue('jl-views', {});
    const logs = {
      lines: [
        { attempt: 1, at: '2026-12-02T09:00:00.100+00:00', line: 'charging card_secret_42' },
        { attempt: 1, at: '2026-12-02T09:00:00.200+00:00', line: HTML },
        { attempt: 2, at: '2026-12-02T09:10:00.100+00:00', line: ANSI },
        { attempt: 2, at: '2026-12-02T09:10:00.200+00:00', line: 'two\nlines' },
      ],
      total: 7,
      claim: '2',
      seq: 2,
    };
    await db.query(`UPDATE background_jobs SET logs = $2, last_error = $3, attempts = 2 WHERE id = $1`, [id, JSON.stringify(logs), STACK]);
    await db.query(
      `INSERT INTO background_job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error) VALUES ($1, 1, 'worker-a', '2026-12-02T09:00:00Z', '2026-12-02T09:00:01Z', 'failed', $2)`,
      [id, STACK],
    );
    await built;
  }, 180_000);
  afterAll(async () => {
    for (const { app } of apps) await app.close();
    await db?.end();
  });

  const page = async (n: number, jobId: string) =>
    (await (await fetch(`${apps[n].baseUrl}/admin/queues/jobs/${jobId}`, { headers: ADMIN })).text()).replace(/ data-label="[^"]*"| class="full"| class="when"/g, '').replace(/<time [^>]*>([^<]*)<\/time>/g, '$1');

  it('the job page lists the lines by attempt, escaped (HTML as text, terminal controls as visible escapes), with how many were dropped', async () => {
    const body = await page(0, id);
    const start = body.indexOf('<h2>Logs</h2>');
    expect(start).toBeGreaterThan(body.indexOf('<h2>Attempt history</h2>')); // beside the attempt history, after it
    const logs = body.slice(start, body.indexOf('</table>', start));
    expect(logs).toContain('4 lines; 3 older lines dropped');
    expect(logs).toMatch(/<tr class="run" data-attempt="1"><th colspan="2" scope="rowgroup">Attempt 1<\/th><\/tr><tr><td>[^<]+<\/td><td><pre class="log">charging card_secret_42<\/pre><\/td><\/tr>/);
    expect(logs).toContain('<pre class="log">&lt;script&gt;alert(&#39;logged&#39;)&lt;/script&gt;</pre>');
    expect(logs).toContain('<th colspan="2" scope="rowgroup">Attempt 2</th>');
    expect(logs).toContain('<pre class="log">\\u001b[31mred\\u001b[0m and \\u001b]52;c;Y2xpcGJvYXJk\\u0007</pre>');
    expect(logs).toContain('<pre class="log">two\nlines</pre>');
    expect(body).not.toContain(HTML);
    expect(body).not.toContain('\u001b');
    expect(body).not.toMatch(/Other columns[\s\S]*logs/);
    expect(await page(0, quiet)).not.toContain('<h2>Logs</h2>');
  });

  it('the attempt history shows each attempt’s whole error (its stack and causes), escaped, unfolded on a click', async () => {
    const body = await page(0, id);
    const start = body.indexOf('<h2>Attempt history</h2>');
    const table = body.slice(start, body.indexOf('</table>', start));
    expect(table).toContain('<details class="stack"><summary>Error: card_secret_42 declined</summary><pre data-field="attempt-error">Error: card_secret_42 declined\n    at charge (/app/billing.js:10:5)\nCaused by: Error: gateway timeout &lt;script&gt;');
  });

  it('hidePayloads hides the lines and the stacks, not that there are some', async () => {
    const body = await page(1, id);
    expect(body).toContain('<h2>Logs</h2><p class="muted" data-field="logs">4 lines; 3 older lines dropped (the module&#39;s jobLogs.maxLines): hidden (hidePayloads)</p>');
    for (const secret of ['card_secret_42', 'alert', 'Y2xpcGJvYXJk', 'two\nlines', 'gateway']) expect([secret, body.includes(secret)]).toEqual([secret, false]);
  });

  it('pg-queue jobs show prints the lines by attempt and each attempt’s whole error, terminal controls shown as escapes', async () => {
    const { code, stdout } = await runCli(['jobs', 'show', id], { DATABASE_URL: url });
    expect(code).toBe(0);
    expect(stdout).not.toContain('\u001b');
    expect(stdout).not.toContain('\u0007');
    expect(stdout).toContain(
      [
        'attempt history (attempts that did not complete, oldest first, each with its whole error)',
        '  1  failed  worker-a  2026-12-02T09:00:00.000Z  1000 ms',
        '      Error: card_secret_42 declined',
        '          at charge (/app/billing.js:10:5)',
        `      Caused by: Error: gateway timeout ${HTML}`,
        '          at post (/app/gateway.js:3:1)',
        'logs (job.log(), oldest first, by attempt: 4 lines, 3 older dropped (jobLogs.maxLines))',
        '  attempt 1',
        '    2026-12-02T09:00:00.100Z  charging card_secret_42',
        `    2026-12-02T09:00:00.200Z  ${HTML}`,
        '  attempt 2',
        '    2026-12-02T09:10:00.100Z  \\u001b[31mred\\u001b[0m and \\u001b]52;c;Y2xpcGJvYXJk\\u0007',
        '    2026-12-02T09:10:00.200Z  two',
        '      lines',
      ].join('\n'),
    );
    const json = JSON.parse((await runCli(['jobs', 'show', id, '--json'], { DATABASE_URL: url })).stdout);
    expect(json).toMatchObject({ logsDropped: 3, logs: [{ attempt: 1, at: '2026-12-02T09:00:00.100Z', line: 'charging card_secret_42' }, {}, { attempt: 2, line: ANSI }, {}] });
    expect((await runCli(['jobs', 'show', quiet], { DATABASE_URL: url })).stdout).not.toContain('logs (');
  });
});
