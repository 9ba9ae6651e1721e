import { Injectable } from '@nestjs/common';
import { afterAll, describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, WorkerPool } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { TcpProxy } from './support/tcp-proxy.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

@Injectable()
class Noop {
  @JobHandler('wake-me')
  async handle() {}
}

describe('LISTEN connection liveness', () => {
  const proxies: TcpProxy[] = [];
  afterAll(async () => {
    for (const p of proxies) await p.close();
  });

  // A flow dropped by a NAT or load balancer: no FIN, no RST, the socket just stops carrying bytes. Without a
  // ping the listener never noticed, and every wake-up fell to the poll (set to a minute here).
  it('finds a black-holed LISTEN connection within seconds, reconnects, and wakes on NOTIFY again', async () => {
    const url = await createTestDatabase('listener-ping');
    const db = sqlPool(url);
    const proxy = await TcpProxy.start(url);
    proxies.push(proxy);
    const app = await startApp(url, {
      providers: [Noop],
      queue: { listenerUrl: proxy.url, pollIntervalMs: 60_000, fallbackPollIntervalMs: 60_000 },
    });
    try {
      const pool = app.get(WorkerPool);
      await waitFor('LISTEN up', async () => pool.listening && proxy.accepted === 1);
      const queue = app.get(QueueService);
      const first = await queue.enqueue('wake-me', {});
      await waitFor('woken by NOTIFY', async () => (await queue.get(first))?.status === 'completed', 5_000);

      const cutAt = Date.now();
      proxy.blackHole();
      await waitFor('a new LISTEN connection', async () => proxy.accepted === 2 && pool.listening, 15_000, 50);
      const detectedMs = Date.now() - cutAt;
      expect(detectedMs).toBeLessThan(12_000); // ping every 5 s, unanswered after 5 s

      const enqueuedAt = Date.now();
      const second = await queue.enqueue('wake-me', {});
      await waitFor('woken by NOTIFY on the new connection', async () => (await queue.get(second))?.status === 'completed', 5_000);
      expect(Date.now() - enqueuedAt).toBeLessThan(3_000);
    } finally {
      await app.close();
      await db.end();
    }
  }, 40_000);

  it('close() returns at once while the database is unreachable (no backoff sleep holds it)', async () => {
    const url = await createTestDatabase('listener-close');
    const proxy = await TcpProxy.start(url);
    proxies.push(proxy);
    const app = await startApp(url, { providers: [Noop], queue: { connection: proxy.url, pollIntervalMs: 60_000 }, logLevels: [] });
    await waitFor('LISTEN up', async () => app.get(WorkerPool).listening);
    await proxy.refuse();
    // Long enough for the listener's reconnect backoff to reach seconds (100 ms doubling, capped at 5 s).
    await new Promise((r) => setTimeout(r, 4_000));
    const t0 = Date.now();
    await app.close();
    expect(Date.now() - t0).toBeLessThan(1_000);
  }, 30_000);
});
