import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { DONE_CHANNEL } from '../src/store/shared.sql.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// waitFor after an outage of the queue's pool while LISTEN is up: the notice arrives, the read of the job fails (the
// pool cannot connect: PgBouncer refuses logins for server_login_retry after PostgreSQL restarts), and the answer
// must come soon after the pool can connect again, not at the next poll (60 s here). The simulation found it
// (seed 44: waiters answered 17-27 s late after a restart behind PgBouncer).
describe('waitFor when reading the awaited job fails, LISTEN up', () => {
  let url: string;
  let db: pg.Pool;
  let proxy: TcpProxy & { url: string };
  let app: INestApplicationContext;

  beforeAll(async () => {
    url = await createTestDatabase('wait_outage');
    db = sqlPool(url);
    proxy = await TcpProxy.start(url);
    // The queue's statements through the proxy, its LISTEN straight to PostgreSQL; no worker runs the job.
    app = await startApp(proxy.url, { queue: { listenerUrl: url, workers: false, pollIntervalMs: 60_000, fallbackPollIntervalMs: 60_000, maintenance: { enabled: false } } });
  });
  afterAll(async () => {
    await app?.close();
    await proxy?.close();
    await db?.end();
  });

  it('answers within seconds of the pool connecting again, with the job the notice named', async () => {
    const queue = app.get(QueueService);
    const id = await queue.enqueue('reports', { n: 1 });
    const answer = queue.waitFor(id, { timeoutMs: 50_000 });
    answer.catch(() => undefined);
    await waitFor('the wait marked on the row', async () => (await db.query<{ awaited: boolean }>('SELECT awaited FROM background_jobs WHERE id = $1', [id])).rows[0].awaited);
    // Wait until the listener is up (its session has run LISTEN), so that the notice below is heard.
    await waitFor('LISTEN up', async () => (await db.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'`)).rowCount! > 0);

    await proxy.refuse();
    // The job finishes as a worker's statement finishes it, notice included.
    await db.query(`UPDATE background_jobs SET status = 'completed', result = '{"done": true}', finished_at = now() WHERE id = $1`, [id]);
    await db.query(`SELECT pg_notify($1, $2)`, [DONE_CHANNEL, `${id}:completed`]);
    // The read the notice starts fails, and so do the tries after it while the pool cannot connect.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const settled = await Promise.race([answer.then(() => 'answered', () => 'rejected'), Promise.resolve('waiting')]);
    expect(settled).toBe('waiting');

    await proxy.reopen();
    const result = await Promise.race([answer, new Promise((resolve) => setTimeout(() => resolve('not answered within 10 s'), 10_000))]);
    // The backoff is at most 2 s by then (250 ms doubling); the poll would have answered a minute after the wait began.
    expect(result).toEqual({ done: true });
  }, 60_000);
});
