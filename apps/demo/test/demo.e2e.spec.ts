import type { INestApplication } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { createDemoApp } from '../src/create-demo-app.js';

// The demo's own wiring (createDemoApp is what main.ts runs) on a database of its own, over real HTTP.
// startBurst 0 keeps the generator, and with it the randomly failing sync queue, out of the way.
describe('demo app', () => {
  let app: INestApplication;
  let db: pg.Pool;
  let base: string;

  beforeAll(async () => {
    const url = await createTestDatabase('demo');
    db = new pg.Pool({ connectionString: url, max: 2 });
    app = await createDemoApp(url, { startBurst: 0, logger: ['error'], dashboardPassword: 'demo-dashboard-pw' });
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
    // If the LISTEN connection comes up while the app is closing, the library re-arms a poll interval that
    // nothing clears and Jest never exits (WorkerPool.beforeApplicationShutdown); so let it come up first.
    await waitFor('the LISTEN connection', async () => {
      const { rowCount } = await db.query(
        `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'nestjs-pg-queue listener' AND query LIKE 'LISTEN%'`,
      );
      return (rowCount ?? 0) > 0;
    });
  });

  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  const post = (path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  const count = async (from: string) => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${from}`)).rows[0].n;
  // Sequences do not roll back: a job id drawn and then undone shows the INSERT really ran.
  const lastJobId = async () => Number((await db.query<{ v: string }>('SELECT last_value AS v FROM background_jobs_id_seq')).rows[0].v);

  async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await probe())) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  const jobStatus = async (id: string) => (await db.query<{ status: string }>('SELECT status FROM background_jobs WHERE id = $1', [id])).rows[0]?.status;

  it('saves a good order and its confirmation email, which a worker then sends', async () => {
    const res = await post('/orders', { email: 'ada@example.com', item: 'keyboard', amount: 49.9 });
    expect(res.status).toBe(201);
    const { orderId, jobId } = (await res.json()) as { orderId: string; jobId: string };
    expect(orderId).toMatch(/^\d+$/);
    expect(jobId).toMatch(/^\d+$/);

    const { rows: orders } = await db.query('SELECT email, item, amount FROM orders WHERE id = $1', [orderId]);
    expect(orders).toEqual([{ email: 'ada@example.com', item: 'keyboard', amount: '49.90' }]);

    await waitFor(`job ${jobId} to complete`, async () => (await jobStatus(jobId)) === 'completed');
    const { rows: jobs } = await db.query('SELECT queue_name, payload, attempts, unique_key FROM background_jobs WHERE id = $1', [jobId]);
    expect(jobs[0]).toMatchObject({ queue_name: 'emails', payload: { to: 'ada@example.com', orderId }, attempts: 1, unique_key: `order-confirmation:${orderId}` });

    const job = await fetch(`${base}/jobs/${jobId}`);
    expect(job.status).toBe(200);
    expect(await job.json()).toMatchObject({ id: jobId, queue: 'emails', status: 'completed' });
  });

  it.each([
    ['amount <= 0', { email: 'bob@example.com', item: 'mouse', amount: 0 }, /amount/],
    ['a missing email', { item: 'mouse', amount: 10 }, /email/],
  ])('refuses an order with %s: 400, and neither the order nor its job is left', async (_, body, reason) => {
    const ordersBefore = await count('orders');
    // The recurring orders-report may fire meanwhile (each minute): leave its jobs out.
    const jobsBefore = await count(`background_jobs WHERE queue_name <> 'orders-report'`);
    const reportsBefore = await count(`background_jobs WHERE queue_name = 'orders-report'`);
    const idBefore = await lastJobId();
    const res = await post('/orders', body);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(reason);
    // The email job was inserted before the check failed, and the rollback took it with the order.
    expect(await lastJobId()).toBe(idBefore + 1 + (await count(`background_jobs WHERE queue_name = 'orders-report'`)) - reportsBefore);
    expect(await count('orders')).toBe(ordersBefore);
    expect(await count(`background_jobs WHERE queue_name <> 'orders-report'`)).toBe(jobsBefore);
  });

  // Each of these was stored changed (0.001 as 0.00), answered 500 (NUL, lone surrogate), or stored an order
  // that made every orders summary of the next hour fail (90 KB item).
  it.each([
    ['an amount with fractions of a cent', { email: 'ada@example.com', item: 'pen', amount: 0.001 }, 'amount must have at most 2 decimal places (cents), got 0.001'],
    ['a NUL in the item', { email: 'ada@example.com', item: 'pen\u0000', amount: 1 }, 'item must not contain a NUL character or an unpaired UTF-16 surrogate'],
    ['a lone surrogate in the email', { email: 'ada\ud800@example.com', item: 'pen', amount: 1 }, 'email must not contain a NUL character or an unpaired UTF-16 surrogate'],
    ['a 90 KB item', { email: 'ada@example.com', item: 'x'.repeat(90_000), amount: 1 }, 'item must be at most 200 characters (got 90000)'],
  ])('refuses an order with %s: 400 naming the field, nothing stored', async (_, body, message) => {
    const ordersBefore = await count('orders');
    const idBefore = await lastJobId();
    const res = await post('/orders', body);
    expect([res.status, ((await res.json()) as { message: string }).message]).toEqual([400, message]);
    expect(await count('orders')).toBe(ordersBefore);
    expect(await lastJobId()).toBe(idBefore + (await count(`background_jobs WHERE queue_name = 'orders-report' AND id > ${idBefore}`)));
  });

  it('stores an amount in cents exactly', async () => {
    const res = await post('/orders', { email: 'ada@example.com', item: 'pen', amount: 0.01 });
    expect(res.status).toBe(201);
    const { orderId, jobId } = (await res.json()) as { orderId: string; jobId: string };
    expect((await db.query('SELECT amount FROM orders WHERE id = $1', [orderId])).rows).toEqual([{ amount: '0.01' }]);
    await waitFor(`job ${jobId} to complete`, async () => (await jobStatus(jobId)) === 'completed');
  });

  it('reports counts per queue and status', async () => {
    const res = await fetch(`${base}/stats`);
    expect(res.status).toBe(200);
    const stats = (await res.json()) as Record<string, Record<string, number>>;
    expect(stats.emails).toEqual({ queued: 0, blocked: 0, processing: 0, completed: 2, failed: 0, cancelled: 0 });
  });

  it('lists the recurring orders report with its next fire, and its handler reports a given minute', async () => {
    const res = await fetch(`${base}/schedules`);
    expect(res.status).toBe(200);
    const [schedule] = (await res.json()) as { name: string; queue: string; cron: string; source: string; nextFireAt: string }[];
    expect(schedule).toMatchObject({ name: 'orders-report', queue: 'orders-report', cron: '* * * * *', source: 'code' });
    const { rows: [clock] } = await db.query<{ now: Date }>('SELECT now()');
    const next = new Date(schedule.nextFireAt).getTime();
    expect(next).toBeGreaterThan(clock.now.getTime() - 1_000);
    expect(next).toBeLessThanOrEqual(clock.now.getTime() + 60_000);
    // A fire's job, as the scheduler makes it, runs the handler (the next real fire may be a minute away).
    const { rows: [job] } = await db.query<{ id: string }>(
      `INSERT INTO background_jobs (queue_name, payload) VALUES ('orders-report', jsonb_build_object('_schedule', jsonb_build_object('name', 'orders-report', 'fireAt', '2026-01-01T00:00:00.000Z'))) RETURNING id`,
    );
    await waitFor('the report job', async () => (await jobStatus(job.id)) === 'completed');
  });

  it('mounts the dashboard at /dashboard behind basic auth (password from the banner)', async () => {
    expect((await fetch(`${base}/dashboard`)).status).toBe(401);
    const auth = (user: string) => ({ authorization: `Basic ${Buffer.from(`${user}:demo-dashboard-pw`).toString('base64')}` });
    const admin = await fetch(`${base}/dashboard`, { headers: auth('admin') });
    expect([admin.status, (await admin.text()).includes('admin · full access')]).toEqual([200, true]);
    const viewer = await fetch(`${base}/dashboard`, { headers: auth('viewer') });
    // A viewer gets no action (no form that posts); the page's own "Pause live updates" button is for everyone.
    expect([viewer.status, (await viewer.text()).includes('method="post"')]).toEqual([200, false]);
  });

  it('answers 400 for a malformed job id and 404 for an unknown one', async () => {
    expect((await fetch(`${base}/jobs/abc`)).status).toBe(400);
    expect((await fetch(`${base}/jobs/999999`)).status).toBe(404);
    expect((await post('/jobs/999999/retry')).status).toBe(404);
    expect((await post('/jobs/999999/cancel')).status).toBe(404);
  });
});
