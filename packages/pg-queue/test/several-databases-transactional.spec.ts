import { Injectable, Module, type DynamicModule, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { DataSource } from 'typeorm';
import { JobHandler, PgQueueModule, QueueService, type Job, type TransactionalJob } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// Issue 39 item 8: transactional handlers run in a transaction on their queue's own database. A named module given
// only `connection` used to run them in the app's default TypeORM DataSource (another database): the handler's writes
// went there, its completion never landed, and with one workerId for both modules it completed the other database's
// running job of the same id and fence token. Two databases of the test server; every assertion reads their tables.

const holds = new Map<string, () => void>();

@Injectable()
class Handlers {
  /** A job of the default database, held running until the test releases it. */
  @JobHandler('main.hold')
  async hold(job: Job) {
    await new Promise<void>((resolve) => holds.set(job.id, resolve));
  }

  /** A transactional job of the reports database: its ledger row and its completion in one transaction. */
  @JobHandler('reports.post', { transactional: true })
  async post(job: TransactionalJob) {
    await job.manager.query(`INSERT INTO ledger (job_id, db) VALUES ($1, current_database())`, [job.id]);
  }
}

@Injectable()
class MainTransactional {
  @JobHandler('main.post', { transactional: true })
  async post(job: TransactionalJob) {
    await job.manager.query(`INSERT INTO ledger (job_id, db) VALUES ($1, current_database())`, [job.id]);
  }
}

async function boot(imports: DynamicModule[], providers: Type[]): Promise<INestApplicationContext> {
  @Module({ imports, providers })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
  try {
    await app.init();
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  return app;
}

describe('transactional handlers run on their queue’s own database (issue 39 item 8)', () => {
  let mainUrl: string;
  let reportsUrl: string;
  let main: pg.Pool;
  let reports: pg.Pool;
  /** Apps without workers that only enqueue (they also ran the queue's migrations on each database). */
  let mainProducer: INestApplicationContext;
  let reportsProducer: INestApplicationContext;
  const open: { close(): Promise<unknown> }[] = [];

  beforeAll(async () => {
    [mainUrl, reportsUrl] = await Promise.all([createTestDatabase('several-tx-main'), createTestDatabase('several-tx-reports')]);
    [main, reports] = [sqlPool(mainUrl), sqlPool(reportsUrl)];
    for (const db of [main, reports]) await db.query(`CREATE TABLE ledger (job_id bigint, db text)`);
    mainProducer = await startApp(mainUrl, { queue: { workers: false, maintenance: { enabled: false }, recurring: { enabled: false } } });
    reportsProducer = await startApp(reportsUrl, { queue: { workers: false, maintenance: { enabled: false }, recurring: { enabled: false } } });
  }, 60_000);
  afterAll(async () => {
    for (const release of holds.values()) release();
    for (const o of open.reverse()) await o.close().catch(() => undefined);
    await mainProducer?.close();
    await reportsProducer?.close();
    await main?.end();
    await reports?.end();
  });

  const row = async (db: pg.Pool, id: string) =>
    (await db.query<{ status: string; attempts: number; locked_by: string | null; fence_token: string }>(`SELECT status, attempts, locked_by, fence_token FROM background_jobs WHERE id = $1`, [id])).rows[0];
  const ledger = async (db: pg.Pool) => (await db.query<{ job_id: string; db: string }>(`SELECT job_id, db FROM ledger ORDER BY job_id`)).rows;
  const dbName = async (db: pg.Pool) => (await db.query<{ name: string }>(`SELECT current_database() AS name`)).rows[0].name;
  /** The next job of each database gets this id: the same id (and fence token 1) in both. */
  const sameNextId = async (id: number) => {
    for (const db of [main, reports]) await db.query(`SELECT setval(pg_get_serial_sequence('background_jobs', 'id'), $1)`, [id - 1]);
  };

  it('a named module given only `connection` refuses a transactional handler at boot, naming the queue, the handler and the fix; nothing runs', async () => {
    await sameNextId(1_000);
    const held = await mainProducer.get(QueueService).enqueue('main.hold', {});
    const posted = await reportsProducer.get(QueueService).enqueue('reports.post', {});
    expect([held, posted]).toEqual(['1000', '1000']);
    const booting = boot(
      [
        TypeOrmModule.forRoot({ type: 'postgres', url: mainUrl }), // the app's default DataSource: on main
        PgQueueModule.forRoot({ workerId: 'shared', maintenance: { enabled: false }, recurring: { enabled: false } }),
        PgQueueModule.forRoot({ name: 'reports', connection: reportsUrl, workerId: 'shared', queues: { 'reports.post': {} }, maintenance: { enabled: false }, recurring: { enabled: false } }),
      ],
      [Handlers],
    );
    const refused = await booting.then(
      (app) => {
        open.push(app);
        return undefined;
      },
      (error: Error) => error.message,
    );
    // The tables first (a wrongly booted app has a second to run its jobs): nothing ran. Booted, the reports job's
    // transaction ran in main, its ledger row went there, and its completion (id 1000, token 1, worker "shared")
    // completed main's job 1000 while its handler was still running.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await ledger(main)).toEqual([]);
    expect(await row(main, held)).not.toMatchObject({ status: 'completed' });
    expect(await row(reports, posted)).toMatchObject({ status: 'queued', attempts: 0, locked_by: null });
    expect(await ledger(reports)).toEqual([]);
    expect(refused).toContain('Handlers.post (queue "reports.post" of PgQueueModule "reports")');
    expect(refused).toContain('replace `connection` with `dataSource`');
    await main.query(`DELETE FROM background_jobs`);
    await reports.query(`DELETE FROM background_jobs`);
  });

  it('so does the default module given only `connection` beside TypeOrmModule (its DataSource may be another database)', async () => {
    const booting = boot(
      [
        TypeOrmModule.forRoot({ type: 'postgres', url: reportsUrl }), // another database than the queue's
        PgQueueModule.forRoot({ connection: mainUrl, maintenance: { enabled: false }, recurring: { enabled: false } }),
      ],
      [MainTransactional],
    );
    const refused = await booting.then(
      (app) => {
        open.push(app);
        return undefined;
      },
      (error: Error) => error.message,
    );
    expect(refused).toContain('MainTransactional.post (queue "main.post" of PgQueueModule)');
    expect(refused).toContain('`dataSourceName`');
  });

  it('given `dataSource` on its own database: the handler’s write and its completion land there, and the other database’s running job of the same id, token and workerId is left alone', async () => {
    const reportsSource = new DataSource({ type: 'postgres', url: reportsUrl, extra: { max: 2 } });
    await reportsSource.initialize();
    open.push({ close: () => reportsSource.destroy() });
    const app = await boot(
      [
        TypeOrmModule.forRoot({ type: 'postgres', url: mainUrl }),
        PgQueueModule.forRoot({ workerId: 'shared', maintenance: { enabled: false }, recurring: { enabled: false } }),
        PgQueueModule.forRoot({ name: 'reports', dataSource: reportsSource, workerId: 'shared', queues: { 'reports.post': {} }, maintenance: { enabled: false }, recurring: { enabled: false } }),
      ],
      [Handlers],
    );
    open.push(app);
    await sameNextId(2_000);
    const queue = app.get(QueueService);
    const held = await queue.enqueue('main.hold', {});
    await waitFor('the main job running', async () => (await row(main, held))?.status === 'processing' && holds.has(held));
    const posted = await queue.enqueue('reports.post', {});
    expect([held, posted]).toEqual(['2000', '2000']);
    await waitFor('the reports job completed', async () => (await row(reports, posted))?.status === 'completed');
    expect(await ledger(reports)).toEqual([{ job_id: posted, db: await dbName(reports) }]);
    expect(await ledger(main)).toEqual([]);
    // Same id, fence token 1 and workerId in main: still running, as its handler is.
    expect(await row(main, held)).toMatchObject({ status: 'processing', locked_by: 'shared', fence_token: '1' });
    holds.get(held)!();
    await waitFor('the main job completed', async () => (await row(main, held))?.status === 'completed');
  });
});
