import type { INestApplication } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { createDemoApp } from '../src/create-demo-app.js';
import { MAX_SUMMARY_STEPS, SUMMARY_STEP_MS, SUMMARY_TIMEOUT_MS, type OrdersSummary } from '../src/queues/orders-summary.queue.js';

// Results, progress, waitFor and @OnJobEvent in the demo, over real HTTP, with real workers.
describe('demo: a summary job returns a result, reports progress; event listeners count outcomes', () => {
  let app: INestApplication;
  let db: pg.Pool;
  let base: string;

  beforeAll(async () => {
    const url = await createTestDatabase('demo-results');
    db = new pg.Pool({ connectionString: url, max: 2 });
    app = await createDemoApp(url, { startBurst: 0, logger: ['error'] });
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  const post = (path: string, body?: unknown) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const get = async (path: string) => {
    const res = await fetch(`${base}${path}`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  it('the summary waits for its result over HTTP, keeps its last progress, and @OnJobEvent counted it', async () => {
    expect((await post('/orders', { email: 'ada@example.com', item: 'keyboard', amount: 49.9 })).status).toBe(201);
    expect((await post('/orders', { email: 'bob@example.com', item: 'keyboard', amount: 50.1 })).status).toBe(201);
    const started = await post('/reports/summary?minutes=60&steps=2');
    expect(started.status).toBe(201);
    const { jobId } = (await started.json()) as { jobId: string };

    const result = await get(`/reports/summary/${jobId}/result?timeoutMs=20000`);
    expect(result.status).toBe(200);
    expect(result.body).toEqual({ orders: 2, total: 100, byItem: { keyboard: { orders: 2, total: 100 } }, otherItems: { items: 0, orders: 0, total: 0 }, from: expect.any(String), until: expect.any(String) });

    // What the database holds: the result and the last progress, with the completed row.
    const { rows } = await db.query(`SELECT status, result, progress FROM background_jobs WHERE id = $1`, [jobId]);
    expect(rows[0]).toMatchObject({ status: 'completed', result: { orders: 2, total: 100 }, progress: { step: 2, of: 2, percent: 100 } });
    expect((await get(`/reports/summary/${jobId}`)).body).toMatchObject({ status: 'completed', progress: { step: 2, of: 2 }, result: { orders: 2 } });

    const deadline = Date.now() + 10_000;
    let counts = (await get('/events')).body;
    while (((counts.emails as Record<string, number> | undefined)?.completed ?? 0) < 2 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      counts = (await get('/events')).body;
    }
    expect(counts).toMatchObject({ 'orders-summary': { completed: 1 }, emails: { completed: 2 } });
  });

  it('answers 400 for bad summary options, naming them; steps stop where the job would time out', async () => {
    const refused = async (query: string) => {
      const res = await post(`/reports/summary?${query}`);
      return [res.status, ((await res.json()) as { message: string }).message];
    };
    expect(await refused('steps=0')).toEqual([400, 'steps must be an integer from 1 to 40, got 0']);
    // 41 steps of 500 ms would leave the 30 s timeout under 10 s for the query; 61 and more always timed out.
    expect(await refused('steps=41')).toEqual([400, 'steps must be an integer from 1 to 40, got 41']);
    expect(await refused('minutes=abc')).toEqual([400, 'minutes must be an integer from 1 to 10080, got "abc"']);
    expect(await refused('minutes=1.5')).toEqual([400, 'minutes must be an integer from 1 to 10080, got "1.5"']);
    expect(MAX_SUMMARY_STEPS * SUMMARY_STEP_MS).toBeLessThanOrEqual(SUMMARY_TIMEOUT_MS - 10_000);
  });

  it('answers 404 with a message for a job that is not a summary, and for no job', async () => {
    const order = await post('/orders', { email: 'cy@example.com', item: 'lamp', amount: 20 });
    const { jobId } = (await order.json()) as { jobId: string };
    for (const path of [`/reports/summary/${jobId}`, `/reports/summary/${jobId}/result?timeoutMs=100`]) {
      expect([path, (await get(path)).status, (await get(path)).body.message]).toEqual([path, 404, `job ${jobId} is not an orders summary (it is a job of queue emails)`]);
    }
    expect(await get('/reports/summary/999999')).toMatchObject({ status: 404, body: { message: 'summary job 999999 not found (it may have been pruned)' } });
    expect((await get('/reports/summary/999999/result')).status).toBe(404);
  });

  it('a summary stays small whatever the orders hold: one 90 KB item name and 30 items give the top 10 and the rest summed', async () => {
    // Placed as older code could (the API now refuses items over 200 characters): one huge name, 30 more items.
    await db.query(`INSERT INTO orders (email, item, amount) SELECT 'big@example.com', repeat('x', 90000), 1000`);
    await db.query(`INSERT INTO orders (email, item, amount) SELECT 'many@example.com', 'item-' || g, g FROM generate_series(1, 30) AS g`);
    const started = await post('/reports/summary?minutes=60&steps=1');
    expect(started.status).toBe(201);
    const { jobId } = (await started.json()) as { jobId: string };
    const result = await get(`/reports/summary/${jobId}/result?timeoutMs=20000`);
    expect(result.status).toBe(200);
    const { rows: [all] } = await db.query<{ orders: number; total: number; items: number }>(
      `SELECT count(*)::int AS orders, sum(amount)::float8 AS total, count(DISTINCT left(item, 200))::int AS items FROM orders`,
    );
    const summary = result.body as unknown as OrdersSummary;
    expect({ orders: summary.orders, total: summary.total, listed: Object.keys(summary.byItem).length }).toEqual({ orders: all.orders, total: all.total, listed: 10 });
    expect(summary.byItem['x'.repeat(200)]).toEqual({ orders: 1, total: 1000 });
    expect(summary.byItem['item-30']).toEqual({ orders: 1, total: 30 });
    const listed = Object.values(summary.byItem).reduce((n, i) => n + i.orders, 0);
    expect(summary.otherItems).toEqual({ items: all.items - 10, orders: all.orders - listed, total: expect.any(Number) });
    const { rows: [row] } = await db.query<{ status: string; bytes: number }>(`SELECT status::text AS status, octet_length(result::text) AS bytes FROM background_jobs WHERE id = $1`, [jobId]);
    expect(row.status).toBe('completed');
    expect(row.bytes).toBeLessThan(4_096);
  });
});
