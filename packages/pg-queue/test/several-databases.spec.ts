import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext, Type } from '@nestjs/common';
import type pg from 'pg';
import type { DataSource } from 'typeorm';
import {
  InjectJobEvents,
  InjectQueueService,
  JobEvents,
  JobHandler,
  OnJobEvent,
  PgQueueModule,
  QueueService,
  RecurringJob,
  getJobEventsToken,
  getQueueServiceToken,
  type Job,
  type JobEvent,
} from 'nestjs-pg-queue';
import { getQueueTestKit, overrideQueueForTesting } from 'nestjs-pg-queue/testing';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, waitFor } from './support/test-app.js';

// One app, two PostgreSQL databases: the default PgQueueModule on `main`, a named one ("reports") that owns the queues
// it lists. Every assertion reads the two databases' tables: which one holds each job, schedule and pause.
const heard: JobEvent[] = [];

@Injectable()
class Handlers {
  constructor(
    @InjectQueueService('reports') readonly reports: QueueService,
    readonly defaultEvents: JobEvents,
    @InjectJobEvents('reports') readonly reportEvents: JobEvents,
  ) {}

  @JobHandler('mail.send')
  async send(job: Job<{ n: number }>) {
    return { sent: job.payload.n };
  }

  @JobHandler('reports.build', { concurrency: 2 })
  async build(job: Job<{ n: number }>) {
    return { built: job.payload.n };
  }

  @RecurringJob('0 3 * * *', { name: 'reports.nightly', queue: 'reports.nightly' })
  async nightly() {
    return null;
  }

  @RecurringJob('* * * * * *', { name: 'reports.tick', queue: 'reports.tick' })
  async tick() {
    return 'tick';
  }

  @OnJobEvent('reports.build', 'completed')
  completed(event: JobEvent) {
    heard.push(event);
  }
}

async function boot(imports: (Type | ReturnType<typeof PgQueueModule.forRoot>)[], providers: Type[] = []): Promise<INestApplicationContext> {
  @Module({ imports, providers })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error'], abortOnError: false });
  await app.init();
  return app;
}

describe('several databases in one app', () => {
  let mainUrl: string;
  let reportsUrl: string;
  let app: INestApplicationContext;
  let main: pg.Pool;
  let reportsDb: pg.Pool;
  const count = async (db: pg.Pool, where = 'true', values: unknown[] = []) =>
    (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE ${where}`, values)).rows[0].n;

  beforeAll(async () => {
    [mainUrl, reportsUrl] = await Promise.all([createTestDatabase('several-main'), createTestDatabase('several-reports')]);
    main = sqlPool(mainUrl);
    reportsDb = sqlPool(reportsUrl);
    app = await boot(
      [
        TypeOrmModule.forRoot({ type: 'postgres', url: mainUrl }),
        TypeOrmModule.forRoot({ name: 'reports', type: 'postgres', url: reportsUrl }),
        PgQueueModule.forRoot({}),
        PgQueueModule.forRoot({ name: 'reports', dataSourceName: 'reports', queues: { 'reports.build': {}, 'reports.nightly': {}, 'reports.tick': {} } }),
      ],
      [Handlers],
    );
  });
  afterAll(async () => {
    await app?.close();
    await main?.end();
    await reportsDb?.end();
  });

  it('routes each enqueue to the database that owns its queue, and each database runs its own queues', async () => {
    const queue = app.get(QueueService);
    const mailId = await queue.enqueue('mail.send', { n: 1 });
    const reportId = await queue.enqueue('reports.build', { n: 2 });
    const many = await queue.enqueueMany([1, 2, 3].map((n) => ({ queue: 'reports.build', payload: { n } })));
    await waitFor('all five completed', async () =>
      (await count(main, `status = 'completed'`)) === 1 && (await count(reportsDb, `queue_name = 'reports.build' AND status = 'completed'`)) === 4);
    expect((await main.query(`SELECT id::text, queue_name, result FROM background_jobs`)).rows).toEqual([{ id: mailId, queue_name: 'mail.send', result: { sent: 1 } }]);
    expect((await reportsDb.query(`SELECT id::text FROM background_jobs WHERE queue_name = 'reports.build' ORDER BY id`)).rows.map((r) => r.id)).toEqual([reportId, ...many]);
    // Ids are per database: get() and waitFor() read their service's database.
    const reports = app.get<QueueService>(getQueueServiceToken('reports'));
    expect(queue.database('reports')).toBe(reports);
    expect(app.get(Handlers).reports).toBe(reports);
    expect((await reports.get(reportId))?.result).toEqual({ built: 2 });
    expect(await reports.waitFor(many[2], { timeoutMs: 5_000 })).toEqual({ built: 3 });
    expect((await queue.get(mailId))?.queue).toBe('mail.send');
    // @OnJobEvent listeners hear the database that runs their queue; its JobEvents is injected by name.
    const { defaultEvents, reportEvents } = app.get(Handlers);
    expect(reportEvents).toBe(app.get(getJobEventsToken('reports')));
    expect(defaultEvents).not.toBe(reportEvents);
    await waitFor('the listener heard four', async () => heard.filter((e) => e.job.queue === 'reports.build').length === 4);
  });

  it('keeps schedules and pauses in the queue’s database', async () => {
    const { rows } = await reportsDb.query(`SELECT name, queue_name FROM background_schedules ORDER BY name`);
    expect(rows).toEqual([
      { name: 'reports.nightly', queue_name: 'reports.nightly' },
      { name: 'reports.tick', queue_name: 'reports.tick' },
    ]);
    // The every-second schedule fires into the reports database, and its jobs run there.
    await waitFor('a tick ran', async () => (await count(reportsDb, `queue_name = 'reports.tick' AND status = 'completed'`)) > 0, 10_000, 100);
    expect(await count(main, `queue_name = 'reports.tick'`)).toBe(0);
    expect((await main.query(`SELECT count(*)::int AS n FROM background_schedules`)).rows[0].n).toBe(0);
    const queue = app.get(QueueService);
    await queue.upsertSchedule({ name: 'reports.weekly', cron: '0 4 * * 1', queue: 'reports.build' });
    await queue.pause('reports.build');
    expect((await reportsDb.query(`SELECT queue_name, paused FROM background_queues WHERE paused`)).rows).toEqual([{ queue_name: 'reports.build', paused: true }]);
    expect((await main.query(`SELECT count(*)::int AS n FROM background_queues WHERE paused`)).rows[0].n).toBe(0);
    expect((await reportsDb.query(`SELECT count(*)::int AS n FROM background_schedules WHERE name = 'reports.weekly'`)).rows[0].n).toBe(1);
    await queue.resume('reports.build');
    expect(await queue.database('reports').pausedQueues()).toEqual([]);
  });

  it('refuses one call with jobs of two databases, storing nothing', async () => {
    const queue = app.get(QueueService);
    const before = [await count(main), await count(reportsDb, `queue_name <> 'reports.tick'`)];
    await expect(queue.enqueueMany([{ queue: 'mail.send', payload: {} }, { queue: 'reports.build', payload: {} }])).rejects.toThrow(
      /enqueueMany: its jobs live in 2 databases \("mail.send" in "default", "reports.build" in "reports"\)/,
    );
    await expect(queue.enqueueFlow({ jobs: [{ ref: 'a', queue: 'mail.send', payload: {} }, { ref: 'b', queue: 'reports.build', payload: {}, dependsOn: ['a'] }] })).rejects.toThrow(/enqueueFlow: its jobs live in 2 databases/);
    expect([await count(main), await count(reportsDb, `queue_name <> 'reports.tick'`)]).toEqual(before);
  });

  it('joins a transaction on the queue’s database, and refuses a manager of another one (nothing stored)', async () => {
    const queue = app.get(QueueService);
    const mainSource = app.get<DataSource>(getDataSourceToken());
    const reportsSource = app.get<DataSource>(getDataSourceToken('reports'));
    // The reports queue in a transaction of the reports database: commits and rolls back with it.
    const id = await reportsSource.transaction((manager) => queue.enqueue('reports.nightly', { n: 5 }, { manager }));
    expect(await count(reportsDb, 'id = $1', [id])).toBe(1);
    await expect(reportsSource.transaction(async (manager) => {
      await queue.enqueue('reports.nightly', { n: 6 }, { manager });
      throw new Error('rolled back');
    })).rejects.toThrow('rolled back');
    expect(await count(reportsDb, `payload = '{"n": 6}'`)).toBe(0);
    // A manager of the main database for a reports queue: refused before anything is written, in either database.
    const before = [await count(main), await count(reportsDb, `queue_name <> 'reports.tick'`)];
    await expect(mainSource.transaction((manager) => queue.enqueue('reports.build', { n: 7 }, { manager }))).rejects.toThrow(
      /enqueue\("reports.build"\): the manager's transaction is on database "t_several_main[^"]*" at 127.0.0.1:\d+, but queue "reports.build" lives in PgQueueModule "reports" \("t_several_reports/,
    );
    await expect(reportsSource.transaction((manager) => queue.enqueueMany([{ queue: 'mail.send', payload: {} }], { manager }))).rejects.toThrow(/enqueueMany\("mail.send"\): the manager's transaction is on database "t_several_reports/);
    // A pg client in a transaction on the wrong database, too.
    const client = await main.connect();
    try {
      await client.query('BEGIN');
      await expect(queue.enqueueUnique('reports.build', { n: 8 }, { manager: client, uniqueKey: 'k8' })).rejects.toThrow(/enqueueUnique\("reports.build"\): the manager's transaction is on database "t_several_main/);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect([await count(main), await count(reportsDb, `queue_name <> 'reports.tick'`)]).toEqual(before);
  });
});

describe('several databases: mistakes refused at boot, by name', () => {
  let url: string;
  let other: string;
  beforeAll(async () => {
    [url, other] = await Promise.all([createTestDatabase('several-boot'), createTestDatabase('several-boot-2')]);
  });

  it.each([
    ['two modules without a name', () => [PgQueueModule.forRoot({ connection: url }), PgQueueModule.forRoot({ connection: other, workers: false })], /PgQueueModule is imported twice without a name/],
    ['a named module that lists no queues', () => [PgQueueModule.forRoot({ connection: url }), PgQueueModule.forRoot({ name: 'reports', connection: other })], /PgQueueModule "reports" lists no queues/],
    [
      'a queue listed by two named modules',
      () => [PgQueueModule.forRoot({ name: 'a', connection: url, queues: { q: {} } }), PgQueueModule.forRoot({ name: 'b', connection: other, queues: { q: {} } })],
      /Queue "q" is listed by PgQueueModule "a" and by "b"/,
    ],
  ])('%s', async (_what, imports, message) => {
    await expect(boot(imports() as ReturnType<typeof PgQueueModule.forRoot>[])).rejects.toThrow(message);
  });

  it('forRootAsync takes the name next to useFactory', async () => {
    const app = await boot([
      PgQueueModule.forRoot({ connection: url, workers: false }),
      PgQueueModule.forRootAsync({ name: 'reports', useFactory: () => ({ connection: other, workers: false, queues: { 'async.q': {} } }) }),
    ]);
    try {
      const id = await app.get(QueueService).enqueue('async.q', {});
      expect((await app.get<QueueService>(getQueueServiceToken('reports')).get(id))?.queue).toBe('async.q');
    } finally {
      await app.close();
    }
  });

  it('a bad name, where the module is declared', () => {
    expect(() => PgQueueModule.forRoot({ name: 'no spaces', connection: url, queues: { q: {} } })).toThrow(/Invalid PgQueueModule name "no spaces": use 1 to 64 characters/);
  });

  it('a handler whose queue no database owns (no module without a name)', async () => {
    @Injectable()
    class Orphan {
      @JobHandler('nobody.owns')
      async run() {}
    }
    await expect(boot([PgQueueModule.forRoot({ name: 'a', connection: url, queues: { q: {} } })], [Orphan])).rejects.toThrow(
      /Queue "nobody.owns" belongs to no database: it is not listed in the `queues` of PgQueueModule "a"/,
    );
  });
});

describe('several databases under the testing kit', () => {
  const ran: string[] = [];
  @Injectable()
  class KitHandlers {
    @JobHandler('kit.main')
    async main(job: Job) {
      ran.push(`main:${job.id}`);
    }

    @JobHandler('kit.reports')
    async reports(job: Job) {
      ran.push(`reports:${job.id}`);
    }
  }
  let urls: string[];
  let pools: pg.Pool[];
  beforeAll(async () => {
    urls = await Promise.all([createTestDatabase('several-kit-main'), createTestDatabase('several-kit-reports')]);
    pools = urls.map(sqlPool);
  });
  afterAll(async () => {
    for (const pool of pools ?? []) await pool.end();
  });
  const build = async (mode: 'manual' | 'inline') => {
    const builder = Test.createTestingModule({
      imports: [PgQueueModule.forRoot({ connection: urls[0] }), PgQueueModule.forRoot({ name: 'reports', connection: urls[1], queues: { 'kit.reports': {} } })],
      providers: [KitHandlers],
    });
    const moduleRef = await overrideQueueForTesting(builder, { mode }).compile();
    return moduleRef.createNestApplication({ logger: ['error'] }).init();
  };
  const statusOf = async (db: pg.Pool, id: string) => (await db.query(`SELECT status::text FROM background_jobs WHERE id = $1`, [id])).rows[0]?.status;

  it("manual: each database's kit drains its own queues", async () => {
    const app = await build('manual');
    try {
      const queue = app.get(QueueService);
      const [mainId, reportId] = [await queue.enqueue('kit.main', {}), await queue.enqueue('kit.reports', {})];
      await getQueueTestKit(app, 'reports').drain();
      expect([await statusOf(pools[0], mainId), await statusOf(pools[1], reportId)]).toEqual(['queued', 'completed']);
      await getQueueTestKit(app).drain();
      expect(await statusOf(pools[0], mainId)).toBe('completed');
      expect(() => getQueueTestKit(app, 'billing')).toThrow(/No PgQueueModule is named "billing"; the app's are "default", "reports"/);
    } finally {
      await app.close();
    }
  });

  it('inline: an enqueue runs its job in its own database before it returns', async () => {
    const app = await build('inline');
    try {
      ran.length = 0;
      const queue = app.get(QueueService);
      const reportId = await queue.enqueue('kit.reports', {});
      const mainId = await queue.enqueue('kit.main', {});
      expect(ran).toEqual([`reports:${reportId}`, `main:${mainId}`]);
      expect([await statusOf(pools[0], mainId), await statusOf(pools[1], reportId)]).toEqual(['completed', 'completed']);
      // The same through the named database's own service, injected by name, alone and in bulk.
      const reports = app.get<QueueService>(getQueueServiceToken('reports'));
      const direct = await reports.enqueue('kit.reports', {});
      const bulk = await reports.enqueueMany([{ queue: 'kit.reports', payload: {} }, { queue: 'kit.reports', payload: {} }]);
      expect(ran.slice(2)).toEqual([direct, ...bulk].map((id) => `reports:${id}`));
      expect(await Promise.all([direct, ...bulk].map((id) => statusOf(pools[1], id)))).toEqual(['completed', 'completed', 'completed']);
    } finally {
      await app.close();
    }
  });
});
