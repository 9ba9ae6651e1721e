import type { INestApplication } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { createDemoApp } from '../src/create-demo-app.js';

// The demo's /metrics and /health, on its own wiring (createDemoApp), over real HTTP.
describe('demo app: /metrics and /health', () => {
  let app: INestApplication;
  let db: pg.Pool;
  let base: string;

  beforeAll(async () => {
    const url = await createTestDatabase('demo_metrics');
    db = new pg.Pool({ connectionString: url, max: 2 });
    app = await createDemoApp(url, { startBurst: 0, logger: ['error'] });
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
    await waitFor('readiness', async () => (await fetch(`${base}/health/ready`)).status === 200);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await probe())) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  it('an order’s email job shows in /metrics; /health, /health/live and /health/ready are up', async () => {
    const res = await fetch(`${base}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ada@example.com', item: 'keyboard', amount: 49.9 }),
    });
    expect(res.status).toBe(201);
    await waitFor('the email counted', async () => /^pg_queue_jobs_completed_total\{queue="emails"\} 1$/m.test(await (await fetch(`${base}/metrics`)).text()));
    const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'emails' AND status = 'completed'`);
    expect(rows[0].n).toBe(1);
    // The depth gauges come from a query whose answer scrapes reuse for 5 s (depthCacheMs): wait for a fresh one.
    const depth = new RegExp(`^pg_queue_jobs\\{queue="emails",state="completed"\\} ${rows[0].n}$`, 'm');
    await waitFor('the depth gauge', async () => depth.test(await (await fetch(`${base}/metrics`)).text()));
    for (const path of ['/health', '/health/live', '/health/ready']) {
      const health = await fetch(`${base}${path}`);
      expect([path, health.status, ((await health.json()) as { status: string }).status]).toEqual([path, 200, 'ok']);
    }
  });
});
