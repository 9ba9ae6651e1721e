import { Injectable } from '@nestjs/common';
import { afterAll, describe, expect, it } from '@jest/globals';
import { DataSource } from 'typeorm';
import pg from 'pg';
import { JobHandler, PgQueueError, QueueService, type Job } from 'nestjs-pg-queue';
import { WorkerPool } from '../src/internal.js';
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

@Injectable()
class BusyHandlers {
  @JobHandler('busy-a', { concurrency: 8 })
  async a(job: Job<{ ms: number }>) {
    await new Promise((resolve) => setTimeout(resolve, job.payload.ms));
  }

  @JobHandler('busy-b', { concurrency: 8 })
  async b(job: Job<{ ms: number }>) {
    await new Promise((resolve) => setTimeout(resolve, job.payload.ms));
  }
}

/** The most connections of each of the queue's application_names seen at once while `work` runs (sampled every 10 ms). */
async function peakConnections(url: string, work: () => Promise<void>): Promise<Record<string, number>> {
  const sampler = new pg.Client({ connectionString: url, application_name: 'budget sampler' });
  await sampler.connect();
  const peak: Record<string, number> = {};
  let stop = false;
  const sampling = (async () => {
    while (!stop) {
      const { rows } = await sampler.query<{ name: string; n: number }>(
        `SELECT application_name AS name, count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND application_name LIKE 'nestjs-pg-queue%' GROUP BY 1`,
      );
      for (const { name, n } of rows) peak[name] = Math.max(peak[name] ?? 0, n);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  try {
    await work();
  } finally {
    stop = true;
    await sampling;
    await sampler.end();
  }
  return peak;
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

  // The connection budget of one instance with the defaults (README: "Connection budget per instance"):
  // API pool 5 (poolSize) + leases pool 2 (leasePoolSize) + maintenance pool 1 (maintenancePoolSize) + 1 LISTEN
  // (workers) + 1 LISTEN (waitFor) + 1 wake-up connection = 11.
  it('the connection budget with the defaults: each role within its own pool, 11 in all under load', async () => {
    const url = await createTestDatabase('budgetcount');
    const db = sqlPool(url);
    const app = await startApp(url, { providers: [BusyHandlers], queue: { maintenance: { sweepIntervalMs: 50, pruneIntervalMs: 100 }, recurring: { pollIntervalMs: 50 } } });
    const queue = app.get(QueueService);
    await queue.upsertSchedule({ name: 'every-second', cron: '* * * * * *', queue: 'busy-a', payload: { ms: 1 } });
    const peak = await peakConnections(url, async () => {
      // Bursts of single enqueues (more at once than the API pool holds), jobs of both queues, and waits on some.
      for (let round = 0; round < 5; round++) {
        const ids = await Promise.all(Array.from({ length: 60 }, (_, i) => queue.enqueue(i % 2 ? 'busy-a' : 'busy-b', { ms: 5 + (i % 3) * 20 })));
        await Promise.all(ids.slice(0, 10).map((id) => queue.waitFor(id, { timeoutMs: 15_000 })));
      }
      await waitFor('every job done', async () => (await db.query(`SELECT 1 FROM background_jobs WHERE status <> 'completed'`)).rowCount === 0, 20_000);
      await new Promise((resolve) => setTimeout(resolve, 1_100)); // a recurring fire, a sweep and a prune pass at least
    });
    expect(peak).toEqual({
      'nestjs-pg-queue api': expect.any(Number),
      'nestjs-pg-queue leases': expect.any(Number),
      'nestjs-pg-queue maintenance': 1,
      'nestjs-pg-queue listener': 2,
      'nestjs-pg-queue wake-ups': 1,
    });
    expect(peak['nestjs-pg-queue api']).toBeLessThanOrEqual(5);
    expect(peak['nestjs-pg-queue leases']).toBeLessThanOrEqual(2);
    expect(Object.values(peak).reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(11);
    await app.close();
    await db.end();
  });

  it('an enqueue-only instance without maintenance and recurring jobs opens its API pool and its wake-up connection only', async () => {
    const url = await createTestDatabase('budgetapi');
    const db = sqlPool(url);
    const app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false }, recurring: { enabled: false }, poolSize: 3 } });
    const queue = app.get(QueueService);
    const peak = await peakConnections(url, async () => {
      await Promise.all(Array.from({ length: 30 }, (_, i) => queue.enqueue('q', { i })));
      await queue.get('1');
      await new Promise((resolve) => setTimeout(resolve, 300));
    });
    expect(peak).toEqual({ 'nestjs-pg-queue api': expect.any(Number), 'nestjs-pg-queue wake-ups': 1 });
    expect(peak['nestjs-pg-queue api']).toBeLessThanOrEqual(3);
    await app.close();
    await db.end();
  });

  // Issue 39 item 5, in one process: while every connection of the API pool holds an enqueue that waits on a key the
  // app's transaction holds, the workers claim, run and complete jobs, the sweeper puts back an expired lease and the
  // recurring tick fires: none of them waits for a connection of the API pool.
  it('every other role keeps working while the API pool is full of enqueues waiting on the app’s lock', async () => {
    const url = await createTestDatabase('budgetroles');
    const db = sqlPool(url);
    const app = await startApp(url, {
      providers: [BusyHandlers],
      queue: { poolSize: 2, leaseMs: 2_000, maintenance: { sweepIntervalMs: 100 }, recurring: { pollIntervalMs: 100 } },
    });
    const queue = app.get(QueueService);
    const holder = await db.connect();
    try {
      // Due once the API pool is full: only a claim (leases pool) can start them.
      const later = await queue.enqueueMany(Array.from({ length: 20 }, () => ({ queue: 'busy-b', payload: { ms: 5 }, delayMs: 1_500 })));
      // A job whose holder died long ago: only the sweeper (maintenance pool) puts it back.
      const { rows: [orphan] } = await db.query<{ id: string }>(
        `INSERT INTO background_jobs (queue_name, status, attempts, locked_by, locked_at, lease_expires_at, fence_token)
         VALUES ('orphans', 'processing', 1, 'gone', now() - interval '1 minute', now() - interval '30 seconds', 1) RETURNING id`,
      );
      await holder.query('BEGIN');
      await queue.enqueue('keyed', {}, { uniqueKey: 'K', manager: holder });
      const enqueues = [queue.enqueue('keyed', { i: 1 }, { uniqueKey: 'K' }), queue.enqueue('keyed', { i: 2 }, { uniqueKey: 'K' })];
      // The two enqueues' backends, waiting on the key's row lock (the app's transaction holds it).
      const waiting = await waitFor('the API pool full of enqueues waiting on the lock', async () => {
        const { rows } = await db.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE application_name = 'nestjs-pg-queue api' AND wait_event_type = 'Lock' ORDER BY pid`,
        );
        return rows.length === 2 ? rows.map((r) => r.pid) : undefined;
      });
      // The recurring tick (maintenance pool) picks up a schedule written straight to the table.
      await db.query(
        `INSERT INTO background_schedules (name, cron, queue_name, payload, next_fire_at, source) VALUES ('roles-tick', '* * * * * *', 'busy-a', '{"ms": 1}', now(), 'runtime')`,
      );
      await waitFor('the delayed jobs claimed, run and completed', async () => {
        const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'completed'`, [later]);
        return rows[0].n === later.length;
      }, 10_000);
      await waitFor('the expired lease swept', async () => (await db.query(`SELECT 1 FROM background_jobs WHERE id = $1 AND status = 'queued'`, [orphan.id])).rowCount === 1, 10_000);
      await waitFor('a recurring fire run', async () => (await db.query(`SELECT 1 FROM background_jobs WHERE payload->'_schedule'->>'name' = 'roles-tick' AND status = 'completed'`)).rowCount! > 0, 10_000);
      // Still blocked, the same two: everything above ran while the API pool could not give a connection. (Counting
      // every Lock wait of the app's connections read 5 in a loaded CI run: other roles' brief waits on each other.)
      const { rows } = await db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE pid = ANY($1::int[]) AND wait_event_type = 'Lock' ORDER BY pid`, [waiting]);
      expect(rows.map((r) => r.pid)).toEqual(waiting);
      await holder.query('COMMIT');
      expect(await Promise.all(enqueues)).toHaveLength(2);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
      await app.close();
      await db.end();
    }
  });
});
