import { Injectable } from '@nestjs/common';
import { afterAll, describe, expect, it } from '@jest/globals';
import { DataSource } from 'typeorm';
import { JobHandler, PgQueueError, QueueService, WorkerPool, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, statusCounts, waitFor } from './support/test-app.js';

// Handlers query the app's DataSource, as real handlers do; the queue must not wait behind them.
let appDataSource: DataSource;
const runs = new Map<string, number>();

@Injectable()
class SlowQueryHandler {
  @JobHandler('slow-query', { concurrency: 2 })
  async handle(job: Job) {
    runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
    await appDataSource.query('SELECT pg_sleep(3)');
  }
}

@Injectable()
class QuickHandler {
  @JobHandler('quick', { concurrency: 1 })
  async handle() {}
}

async function bootWithin<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

const opened: DataSource[] = [];
afterAll(async () => {
  await Promise.all(opened.map((d) => (d.isInitialized ? d.destroy() : undefined)));
});

async function appDataSourceOf(url: string, max: number): Promise<DataSource> {
  const dataSource = new DataSource({ type: 'postgres', url, extra: { max } });
  await dataSource.initialize();
  opened.push(dataSource);
  return dataSource;
}

describe('the queue has a connection budget of its own', () => {
  it('handlers holding every connection of the app pool (max 2, 3 s queries) do not starve heartbeats and outcomes', async () => {
    const url = await createTestDatabase('budget');
    const db = sqlPool(url);
    appDataSource = await appDataSourceOf(url, 2);
    runs.clear();
    const app = await startApp(url, {
      providers: [SlowQueryHandler],
      queue: { dataSource: appDataSource, leaseMs: 2_000, maintenance: { sweepIntervalMs: 200 } },
    });
    await app.get(QueueService).enqueueMany([{ queue: 'slow-query', payload: 1 }, { queue: 'slow-query', payload: 2 }]);
    await waitFor('both completed', async () => (await statusCounts(db, 'slow-query')).completed === 2, 15_000);
    const { rows } = await db.query(`SELECT attempts, last_error FROM background_jobs ORDER BY id`);
    expect(rows).toEqual([{ attempts: 1, last_error: null }, { attempts: 1, last_error: null }]);
    expect([...runs.values()]).toEqual([1, 1]);
    await app.close();
    await db.end();
  });

  it('shuts down within the grace period while handlers hold the app pool', async () => {
    const url = await createTestDatabase('budgetstop');
    const db = sqlPool(url);
    appDataSource = await appDataSourceOf(url, 2);
    const app = await startApp(url, { providers: [SlowQueryHandler], queue: { dataSource: appDataSource, shutdownGraceMs: 300 } });
    await app.get(QueueService).enqueueMany([{ queue: 'slow-query', payload: 1 }, { queue: 'slow-query', payload: 2 }]);
    await waitFor('2 running', async () => app.get(WorkerPool).activeCounts()['slow-query'] === 2);
    const t0 = Date.now();
    await app.close();
    const took = Date.now() - t0;
    expect(took).toBeLessThan(2_000);
    // Both were put back, the attempt not counted.
    expect(await statusCounts(db, 'slow-query')).toEqual({ queued: 2 });
    await db.end();
  });

  it('boots, migrates and works on an app DataSource with a single connection (extra: { max: 1 })', async () => {
    const url = await createTestDatabase('budgetone');
    const db = sqlPool(url);
    const dataSource = await appDataSourceOf(url, 1);
    const app = await bootWithin(10_000, 'the boot', startApp(url, { providers: [QuickHandler], queue: { dataSource } }));
    await app.get(QueueService).enqueue('quick', {});
    await dataSource.transaction((manager) => app.get(QueueService).enqueue('quick', {}, { manager }));
    await waitFor('both completed', async () => (await statusCounts(db, 'quick')).completed === 2);
    await app.close();
    await db.end();
  });

  // IAM-style tokens: the password is a function. listenerUrl without a password must keep it (pg would let
  // the URL's empty password override it). Polls every minute: only NOTIFY through LISTEN runs the job in time.
  it.each([
    ['the LISTEN connection dials with the DataSource’s password function', false],
    ['listenerUrl without a password keeps the DataSource’s password function', true],
  ])('%s: LISTEN connects and a job runs on NOTIFY', async (_title, withListenerUrl) => {
    const url = await createTestDatabase(withListenerUrl ? 'pwfnlistener' : 'pwfn');
    const u = new URL(url);
    const db = sqlPool(url);
    let asked = 0;
    const dataSource = new DataSource({
      type: 'postgres',
      host: u.hostname,
      port: Number(u.port),
      username: decodeURIComponent(u.username),
      database: u.pathname.slice(1),
      password: async () => {
        asked++;
        return decodeURIComponent(u.password);
      },
    });
    await dataSource.initialize();
    opened.push(dataSource);
    const listenerUrl = withListenerUrl ? `postgres://${u.username}@${u.host}${u.pathname}` : undefined;
    const app = await startApp(url, { providers: [QuickHandler], queue: { dataSource, listenerUrl, pollIntervalMs: 60_000, fallbackPollIntervalMs: 60_000 } });
    await waitFor('LISTEN connected', async () => app.get(WorkerPool).listening, 5_000);
    await app.get(QueueService).enqueue('quick', {});
    await waitFor('the job ran on NOTIFY', async () => (await statusCounts(db, 'quick')).completed === 1, 5_000);
    expect(asked).toBeGreaterThanOrEqual(3); // the DataSource, the queue's pool, the listener
    await app.close();
    await db.end();
  });

  it('a queue statement blocked by a lock fails after statementTimeoutMs, and a full pool fails after connectTimeoutMs', async () => {
    const url = await createTestDatabase('budgettimeout');
    const db = sqlPool(url);
    const app = await startApp(url, { queue: { workers: false, poolSize: 1, statementTimeoutMs: 1_000, connectTimeoutMs: 500 } });
    const queue = app.get(QueueService);
    const locker = await db.connect();
    await locker.query(`BEGIN; LOCK TABLE background_jobs IN ACCESS EXCLUSIVE MODE`);
    const t0 = Date.now();
    const [blocked, waiting] = await Promise.allSettled([queue.enqueue('q', {}), queue.enqueue('q', {})]);
    expect(blocked).toMatchObject({ status: 'rejected', reason: { code: '57014' } }); // canceling statement due to statement timeout
    expect(waiting).toMatchObject({ status: 'rejected', reason: expect.any(PgQueueError) });
    expect((waiting as PromiseRejectedResult).reason.message).toMatch(/connectTimeoutMs \(500 ms\).*poolSize \(1\)/);
    expect(Date.now() - t0).toBeLessThan(3_000);
    await locker.query('ROLLBACK');
    locker.release();
    expect(await app.get(QueueService).enqueue('q', {})).toMatch(/^\d+$/);
    expect(await statusCounts(db, 'q')).toEqual({ queued: 1 }); // nothing half-stored from the failed ones
    await app.close();
    await db.end();
  });
});
