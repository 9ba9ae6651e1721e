import { Injectable, Logger, Module, type INestApplicationContext, type Provider } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { JobHandler, PG_QUEUE_MIGRATIONS, PgQueueError, PgQueueModule, QueueService, type BatchJob, type Job, type PgQueueModuleOptions, type TransactionalJob } from 'nestjs-pg-queue';
import { JobStore, WorkerPool } from '../src/internal.js';
import { createTestDatabase, pgBouncerAvailable, startPgBouncer, withDatabaseName, type PgBouncer } from '@internal/pg-harness';
import { runQueueMigrations } from '../src/connection/run-queue-migrations.js';
import { Pruner } from '../src/maintenance/pruner.js';
import { WakeSender } from '../src/waking/wake-sender.js';
import { CreateSlowRows1900000000001, SlowIndex1900000000002 } from './support/slow-index-migrations.js';
import { sqlPool, startApp, statusCounts, waitFor } from './support/test-app.js';

// Everything the queue does, through a real PgBouncer 1.18 in transaction mode (PostgreSQL behind it),
// with LISTEN on a direct connection. CI installs Debian's `pgbouncer` package; without it this file skips.
const available = pgBouncerAvailable();
if (!available) console.warn('pgbouncer.spec.ts skipped: /usr/sbin/pgbouncer is not installed (apt-get install pgbouncer)');
const describeWithBouncer = available ? describe : describe.skip;

let records: ReturnType<typeof sqlPool>;

@Injectable()
class Recorder {
  @JobHandler('bounced', { concurrency: 10 })
  async handle(job: Job) {
    await records.query(`INSERT INTO runs (job_id) VALUES ($1)`, [job.id]);
  }
}

/** Issue 20's handler shapes through the pooler: a durable step, a transactional handler, a batch handler. */
@Injectable()
class Shapes {
  @JobHandler('bounced-steps', { maxAttempts: 2, backoff: { baseMs: 0, jitter: false } })
  async steps(job: Job) {
    await job.step('record', () => records.query(`INSERT INTO runs (job_id) VALUES ($1)`, [job.id]).then(() => 1));
    if (job.attempt === 1) throw new Error('after the step');
  }

  @JobHandler('bounced-tx', { transactional: true })
  async tx(job: TransactionalJob) {
    await job.manager.query(`INSERT INTO runs (job_id) VALUES ($1)`, [job.id]);
  }

  @JobHandler('bounced-batch', { batch: { size: 20 } })
  async batch(jobs: BatchJob[]) {
    await records.query(`INSERT INTO runs (job_id) SELECT unnest($1::int8[])`, [jobs.map((j) => j.id)]);
  }
}

/** Several databases through the pooler: one queue in the default module's database, one in a named module's. */
@Injectable()
class TwoDatabases {
  @JobHandler('bounced-main', { concurrency: 5 })
  async main(job: Job<{ i: number }>) {
    return { main: job.payload.i };
  }

  @JobHandler('bounced-reports', { concurrency: 5 })
  async reports(job: Job<{ i: number }>) {
    return { reports: job.payload.i };
  }
}

/** Partitioned history through the pooler: jobs that only complete. */
@Injectable()
class Finisher {
  @JobHandler('bounced-history', { concurrency: 5 })
  async finish(job: Job<{ i: number }>) {
    return { i: job.payload.i };
  }
}

describeWithBouncer('through PgBouncer in transaction mode', () => {
  let bouncer: PgBouncer;
  let directUrl: string;
  let bouncedUrl: string;
  const dataSources: DataSource[] = [];
  const apps: INestApplicationContext[] = [];

  async function bouncedDataSource(): Promise<DataSource> {
    const dataSource = new DataSource({ type: 'postgres', url: bouncedUrl, extra: { max: 4 } });
    await dataSource.initialize();
    dataSources.push(dataSource);
    return dataSource;
  }

  async function boot(queue: PgQueueModuleOptions, providers: Provider[] = [Recorder]): Promise<INestApplicationContext> {
    const app = await startApp(bouncedUrl, { providers, queue });
    apps.push(app);
    return app;
  }

  beforeAll(async () => {
    directUrl = await createTestDatabase('bouncer');
    bouncer = await startPgBouncer(process.env.PG_QUEUE_TEST_SERVER_URL!, { poolMode: 'transaction', poolSize: 10 });
    bouncedUrl = withDatabaseName(bouncer.url, new URL(directUrl).pathname.slice(1));
    records = sqlPool(directUrl);
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await Promise.all(dataSources.map((d) => d.destroy()));
    await records?.end();
    await bouncer?.stop();
  });

  it('with transactionPooler: three instances migrate at once; enqueue, claim, complete, LISTEN, pause/resume, cancel all work', async () => {
    const options = { transactionPooler: true, listenerUrl: directUrl, pollIntervalMs: 60_000, fallbackPollIntervalMs: 60_000 };
    const [a] = await Promise.all([
      boot({ ...options, dataSource: await bouncedDataSource() }),
      boot({ ...options, dataSource: await bouncedDataSource(), workers: false }),
      boot({ ...options, connection: bouncedUrl, workers: false }),
    ]);
    await records.query(`CREATE TABLE runs (job_id bigint NOT NULL)`);
    const { rows: migrations } = await records.query(`SELECT name FROM migrations ORDER BY id`);
    expect(new Set(migrations.map((m) => m.name)).size).toBe(migrations.length);
    await waitFor('LISTEN up on the direct connection', async () => a.get(WorkerPool).listening, 5_000);

    const queue = a.get(QueueService);
    const ids = await Promise.all(Array.from({ length: 200 }, (_, i) => queue.enqueue('bounced', { i })));
    expect(new Set(ids).size).toBe(200);
    // Polling is off (a minute): only NOTIFY through the direct LISTEN connection wakes the worker.
    await waitFor('200 completed', async () => (await statusCounts(records, 'bounced')).completed === 200, 20_000);
    const { rows: runs } = await records.query(`SELECT count(*)::int AS n, count(DISTINCT job_id)::int AS jobs FROM runs`);
    expect(runs).toEqual([{ n: 200, jobs: 200 }]);

    // Those wake-ups went through the pooler too: each insert skipped the trigger, and the wake sender's
    // autocommit statement (unnamed, on its own client of the pooler) notified once.
    const listener = new pg.Client({ connectionString: directUrl });
    await listener.connect();
    try {
      const heard: string[] = [];
      listener.on('notification', (n) => heard.push(n.payload ?? ''));
      await listener.query(`LISTEN pg_queue_jobs`);
      await queue.enqueue('bounced-notice', {});
      await a.get(WakeSender).flush();
      await records.query(`SELECT pg_notify('pg_queue_jobs', 'marker')`);
      await waitFor('the marker', async () => heard.includes('marker'), 5_000, 5);
      expect(heard).toEqual(['bounced-notice', 'marker']);
    } finally {
      await listener.end();
    }

    await queue.pause('bounced');
    expect(await queue.pausedQueues()).toEqual(['bounced']);
    const paused = await queue.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ queue: 'bounced', payload: { i } })));
    await new Promise((r) => setTimeout(r, 500));
    expect(await statusCounts(records, 'bounced')).toEqual({ completed: 200, queued: 5 });
    await queue.resume('bounced');
    await waitFor('the paused five completed', async () => (await statusCounts(records, 'bounced')).completed === 205, 10_000);
    expect(paused).toHaveLength(5);

    const later = await queue.enqueue('bounced', {}, { delayMs: 60_000 });
    expect(await queue.cancel(later)).toBe('cancelled');
    expect((await queue.get(later))?.status).toBe('cancelled');
    expect(await queue.stats()).toMatchObject({ bounced: { completed: 205, cancelled: 1, queued: 0 } });

    // Transactional enqueue runs on the app's DataSource, through the same PgBouncer.
    const appDataSource = dataSources[0];
    await expect(
      appDataSource.transaction(async (manager) => {
        await queue.enqueue('in-transaction', { rolledBack: true }, { manager });
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    await appDataSource.transaction((manager) => queue.enqueue('in-transaction', { rolledBack: false }, { manager }));
    const { rows: kept } = await records.query(`SELECT payload FROM background_jobs WHERE queue_name = 'in-transaction'`);
    expect(kept).toEqual([{ payload: { rolledBack: false } }]);
  });

  it('durable steps, transactional handlers and batch handlers through the pooler: each job’s write once', async () => {
    const options = { transactionPooler: true, listenerUrl: directUrl, maintenance: { enabled: false } };
    const app = await boot({ ...options, dataSource: await bouncedDataSource() }, [Shapes]);
    await records.query(`CREATE TABLE IF NOT EXISTS runs (job_id bigint NOT NULL)`);
    const queue = app.get(QueueService);
    const stepped = await queue.enqueueMany(Array.from({ length: 10 }, () => ({ queue: 'bounced-steps', payload: {} })));
    const tx = await queue.enqueueMany(Array.from({ length: 10 }, () => ({ queue: 'bounced-tx', payload: {} })));
    const batched = await queue.enqueueMany(Array.from({ length: 50 }, () => ({ queue: 'bounced-batch', payload: {} })));
    const all = [...stepped, ...tx, ...batched];
    await waitFor('all completed', async () => (await records.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'completed'`, [all])).rows[0].n === all.length, 20_000);
    const { rows } = await records.query(`SELECT job_id::text AS id, count(*)::int AS n FROM runs WHERE job_id = ANY($1::int8[]) GROUP BY job_id`, [all]);
    expect(rows.length).toBe(all.length);
    expect(rows.filter((r) => r.n !== 1)).toEqual([]);
    const { rows: attempts } = await records.query(`SELECT DISTINCT attempts FROM background_jobs WHERE id = ANY($1::int8[])`, [stepped]);
    expect(attempts).toEqual([{ attempts: 2 }]); // the step ran on attempt 1 and was replayed on attempt 2
  });

  it('without it, the named statements fail and the error says what to set', async () => {
    // Ten client connections over two server connections: each statement lands where another client
    // prepared it already, or where it was never prepared.
    const narrow = await startPgBouncer(process.env.PG_QUEUE_TEST_SERVER_URL!, { poolMode: 'transaction', poolSize: 2 });
    const narrowUrl = withDatabaseName(narrow.url, new URL(directUrl).pathname.slice(1));
    const app = await boot({ connection: narrowUrl, poolSize: 10, workers: false, migrationsRun: false, statementTimeoutMs: 0 }, []);
    const queue = app.get(QueueService);
    const before = Number((await records.query(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n);
    const outcomes = await Promise.allSettled(Array.from({ length: 200 }, (_, i) => queue.enqueue('unbounced', { i })));
    const failures = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected').map((o) => o.reason as Error);
    console.log(`without transactionPooler: ${failures.length} of 200 concurrent enqueues failed through PgBouncer`);
    expect(failures.length).toBeGreaterThan(0);
    expect(failures.filter((e) => !(e instanceof PgQueueError && /transactionPooler: true/.test(e.message)))).toEqual([]);
    expect(failures[0].message).toMatch(/prepared statement "pgq_insertJob(Plain)?(WakeDeferred)?"/);
    // Nothing half-stored: exactly the successful enqueues are in the table.
    const after = Number((await records.query(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n);
    expect(after - before).toBe(200 - failures.length);
    await app.close();
    apps.splice(apps.indexOf(app), 1);
    await narrow.stop();
  });

  it('two runners through the pooler racing a CREATE INDEX CONCURRENTLY migration hold the lock on a direct session: recorded once, the index valid', async () => {
    const url = await createTestDatabase('bouncercic');
    const bounced = withDatabaseName(bouncer.url, new URL(url).pathname.slice(1));
    const all = [...PG_QUEUE_MIGRATIONS, CreateSlowRows1900000000001, SlowIndex1900000000002];
    const run = async () => {
      const dataSource = new DataSource({ type: 'postgres', url: bounced, extra: { max: 1 } });
      await dataSource.initialize();
      dataSources.push(dataSource);
      const openSession = async () => new DataSource({ type: 'postgres', url, extra: { max: 1 } }).initialize();
      return runQueueMigrations(dataSource, all, { openSession });
    };
    const results = await Promise.allSettled([run(), run()]);
    expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok']);
    const db = sqlPool(url);
    const { rows: recorded } = await db.query(`SELECT count(*)::int AS n FROM migrations WHERE name = 'SlowIndex1900000000002'`);
    const { rows: index } = await db.query(`SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass('slow_rows_key_idx')`);
    expect(recorded).toEqual([{ n: 1 }]);
    expect(index).toEqual([{ valid: true }]);
    await db.end();
  });

  it('partitioned history through the pooler: the mover makes partitions and moves jobs, get() reads them there, the pruner detaches and drops a partition', async () => {
    const url = await createTestDatabase('bouncerhistory');
    const bounced = withDatabaseName(bouncer.url, new URL(url).pathname.slice(1));
    const db = sqlPool(url);
    try {
      const hour = 3_600_000;
      const app = await startApp(bounced, {
        providers: [Finisher],
        queue: {
          transactionPooler: true,
          listenerUrl: url,
          maintenance: { completedRetentionMs: 2 * hour, failedRetentionMs: 2 * hour, history: { partitionWidth: 'hour', moveIntervalMs: 20 } },
        },
      });
      apps.push(app);
      const queue = app.get(QueueService);
      const ids = await queue.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ queue: 'bounced-history', payload: { i } })));
      // 20 jobs that finished 90 minutes ago: within the app's retention (the mover takes them), in an hourly
      // partition whose upper bound is at least half an hour old, which the test's pruner below drops.
      const { rows: old } = await db.query<{ id: string }>(
        `INSERT INTO background_jobs (queue_name, payload, status, attempts, finished_at)
         SELECT 'bounced-old', '{}', 'completed', 1, now() - interval '90 minutes' FROM generate_series(1, 20) RETURNING id::text AS id`,
      );
      await waitFor('all 70 jobs in history', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs_history`)).rows[0].n === 70, 20_000);
      expect((await db.query(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n).toBe(0);
      expect(await queue.get(ids[7])).toMatchObject({ status: 'completed', result: { i: 7 } });
      const partitionsOf = async () =>
        (await db.query<{ name: string }>(`SELECT c.relname AS name FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
           WHERE i.inhparent = 'background_jobs_history_completed'::regclass ORDER BY 1`)).rows.map((r) => r.name);
      const before = await partitionsOf();
      expect(before.length).toBeGreaterThanOrEqual(2);

      // A pruner with a 10-minute retention, on the app's pool through the pooler: DETACH ... CONCURRENTLY cannot
      // run in a transaction block, so each of its statements must reach the server alone.
      const store = app.get(JobStore);
      const pruner = new Pruner(store, { completedRetentionMs: 10 * 60_000, failedRetentionMs: 10 * 60_000, batchSize: 1_000, maxBatchesPerPass: 10 }, new Logger('test pruner'), store.history);
      expect(await pruner.runOnce()).toMatchObject({ ran: true, partitions: 1 });
      const after = await partitionsOf();
      expect(after).toHaveLength(before.length - 1);
      const dropped = before.filter((name) => !after.includes(name));
      const { rows: [gone] } = await db.query(
        `SELECT to_regclass($1) IS NULL AS table_gone, (SELECT count(*)::int FROM background_jobs_all WHERE id = ANY($2::int8[])) AS old_left,
                (SELECT count(*)::int FROM background_jobs_all WHERE id = ANY($3::int8[])) AS new_kept`,
        [dropped[0], old.map((r) => r.id), ids],
      );
      expect(gone).toEqual({ table_gone: true, old_left: 0, new_kept: 50 });
    } finally {
      await db.end();
    }
  });

  it('several databases through the pooler: each enqueue lands in its queue’s database, each database’s NOTIFY wakes its own workers, pauses stay apart', async () => {
    const [mainUrl, reportsUrl] = await Promise.all([createTestDatabase('bouncermain'), createTestDatabase('bouncerreports')]);
    const bounced = (url: string) => withDatabaseName(bouncer.url, new URL(url).pathname.slice(1));
    const [main, reports] = [sqlPool(mainUrl), sqlPool(reportsUrl)];
    // Polling off (a minute): only each database's NOTIFY, heard on its own direct LISTEN connection, wakes its workers.
    const pooled = { transactionPooler: true, pollIntervalMs: 60_000, fallbackPollIntervalMs: 60_000 } as const;
    @Module({
      imports: [
        PgQueueModule.forRoot({ ...pooled, connection: bounced(mainUrl), listenerUrl: mainUrl }),
        PgQueueModule.forRoot({ ...pooled, name: 'reports', connection: bounced(reportsUrl), listenerUrl: reportsUrl, queues: { 'bounced-reports': {} } }),
      ],
      providers: [TwoDatabases],
    })
    class TwoDatabasesApp {}
    const app = await NestFactory.createApplicationContext(TwoDatabasesApp, { logger: ['error'], abortOnError: false });
    apps.push(app);
    try {
      await app.init();
      const queue = app.get(QueueService);
      const [toMain, toReports] = await Promise.all([
        Promise.all(Array.from({ length: 60 }, (_, i) => queue.enqueue('bounced-main', { i }))),
        Promise.all(Array.from({ length: 60 }, (_, i) => queue.enqueue('bounced-reports', { i }))),
      ]);
      await waitFor('60 completed in each database', async () =>
        (await statusCounts(main, 'bounced-main')).completed === 60 && (await statusCounts(reports, 'bounced-reports')).completed === 60, 20_000);
      // Each database holds its own queue's jobs only, each completed once with its handler's result.
      const held = async (db: pg.Pool) =>
        (await db.query<{ queue: string; jobs: number; results: number }>(
          `SELECT queue_name AS queue, count(*)::int AS jobs, count(DISTINCT result)::int AS results FROM background_jobs GROUP BY 1`,
        )).rows;
      expect(await held(main)).toEqual([{ queue: 'bounced-main', jobs: 60, results: 60 }]);
      expect(await held(reports)).toEqual([{ queue: 'bounced-reports', jobs: 60, results: 60 }]);
      expect((await queue.database('reports').get(toReports[3]))?.result).toEqual({ reports: 3 });
      expect((await queue.get(toMain[3]))?.result).toEqual({ main: 3 });

      // A pause is stored in its queue's database and holds only that queue.
      await queue.pause('bounced-reports');
      expect((await reports.query(`SELECT queue_name FROM background_queues WHERE paused`)).rows).toEqual([{ queue_name: 'bounced-reports' }]);
      expect((await main.query(`SELECT count(*)::int AS n FROM background_queues WHERE paused`)).rows[0].n).toBe(0);
      await Promise.all([queue.enqueue('bounced-reports', { i: 100 }), queue.enqueue('bounced-main', { i: 100 })]);
      await waitFor('the main job ran', async () => (await statusCounts(main, 'bounced-main')).completed === 61, 10_000);
      await new Promise((r) => setTimeout(r, 300));
      expect(await statusCounts(reports, 'bounced-reports')).toEqual({ completed: 60, queued: 1 });
      await queue.resume('bounced-reports');
      await waitFor('the paused reports job ran', async () => (await statusCounts(reports, 'bounced-reports')).completed === 61, 10_000);
    } finally {
      await main.end();
      await reports.end();
    }
  });

  it('without it, the statement_timeout startup parameter is refused, and the error says what to set', async () => {
    const app = await boot({ connection: bouncedUrl, workers: false, migrationsRun: false }, []);
    const error = await app.get(QueueService).enqueue('unbounced', {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PgQueueError);
    expect((error as Error).message).toMatch(/unsupported startup parameter.*transactionPooler: true/s);
  });
});
