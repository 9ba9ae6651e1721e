import type { INestApplication } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { createDemoApp } from '../src/create-demo-app.js';

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
    expect(result.body).toMatchObject({ orders: 2, total: 100, byItem: { keyboard: { orders: 2, total: 100 } } });

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

  it('answers 400 for bad summary options and 404 for a job that is not a summary', async () => {
    expect((await post('/reports/summary?steps=0')).status).toBe(400);
    expect((await get('/reports/summary/999999')).status).toBe(404);
    expect((await get('/reports/summary/999999/result')).status).toBe(404);
  });
});
