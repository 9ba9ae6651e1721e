import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { Registry } from 'prom-client';
import { JobHandler, PgQueueModule, QueueService, type Job } from 'nestjs-pg-queue';
import { PgQueueDashboardModule } from 'nestjs-pg-queue/dashboard';
import { PgQueueHealthIndicator, PgQueueHealthModule } from 'nestjs-pg-queue/health';
import { PgQueueMetricsModule } from 'nestjs-pg-queue/metrics';
import { createTestDatabase } from '@internal/pg-harness';
import { parsePrometheusText, sampleValue } from './support/prometheus-text.js';
import { runCli } from './support/run-cli.js';
import { sqlPool, waitFor } from './support/test-app.js';

// Two databases in one HTTP app, with what operators look at: the metrics endpoint, the health checks, one dashboard
// per database, and the CLI's --database. Each figure is checked against what the two databases hold.
@Injectable()
class Handlers {
  @JobHandler('mail.send')
  async send() {}

  @JobHandler('reports.build', { maxAttempts: 1 })
  async build(job: Job<{ fail?: boolean }>) {
    if (job.payload.fail) throw new Error('the report failed');
  }
}

describe('several databases: metrics, health checks, dashboards and the CLI', () => {
  let mainUrl: string;
  let reportsUrl: string;
  let app: INestApplication;
  let base: string;
  let main: pg.Pool;
  let reportsDb: pg.Pool;
  const statuses = async (db: pg.Pool) =>
    Object.fromEntries((await db.query<{ k: string; n: number }>(`SELECT queue_name || ':' || status AS k, count(*)::int AS n FROM background_jobs GROUP BY 1`)).rows.map((r) => [r.k, r.n]));

  beforeAll(async () => {
    [mainUrl, reportsUrl] = await Promise.all([createTestDatabase('several-http-main'), createTestDatabase('several-http-reports')]);
    main = sqlPool(mainUrl);
    reportsDb = sqlPool(reportsUrl);
    const maintenance = { enabled: false, completedRetentionMs: 86_400_000 };
    @Module({
      imports: [
        PgQueueModule.forRoot({ connection: mainUrl, maintenance }),
        PgQueueModule.forRoot({ name: 'reports', connection: reportsUrl, maintenance, queues: { 'reports.build': {} } }),
        PgQueueMetricsModule.forRoot({ register: new Registry() }),
        PgQueueHealthModule,
        PgQueueDashboardModule.forRoot({ path: 'queues', public: true }),
        PgQueueDashboardModule.forRoot({ path: 'queues/reports', public: true, database: 'reports' }),
      ],
      providers: [Handlers],
    })
    class HttpAppModule {}
    app = await NestFactory.create(HttpAppModule, { logger: ['error'], abortOnError: false });
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
    const queue = app.get(QueueService);
    await queue.enqueueMany(Array.from({ length: 3 }, () => ({ queue: 'mail.send', payload: {} })));
    await queue.enqueueMany([{ queue: 'reports.build', payload: {} }, { queue: 'reports.build', payload: {} }, { queue: 'reports.build', payload: { fail: true } }]);
    await waitFor('all six finished', async () => {
      const [m, r] = [await statuses(main), await statuses(reportsDb)];
      return m['mail.send:completed'] === 3 && r['reports.build:completed'] === 2 && r['reports.build:failed'] === 1;
    });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await main?.end();
    await reportsDb?.end();
  });

  it('one /metrics for both databases: each queue’s counters and depth from the database that runs it', async () => {
    const samples = parsePrometheusText(await (await fetch(`${base}/metrics`)).text());
    expect(sampleValue(samples, 'pg_queue_jobs_completed_total', { queue: 'mail.send' })).toBe(3);
    expect(sampleValue(samples, 'pg_queue_jobs_completed_total', { queue: 'reports.build' })).toBe(2);
    expect(sampleValue(samples, 'pg_queue_jobs_dead_total', { queue: 'reports.build' })).toBe(1);
    // The depth gauges, against each database's table.
    expect(sampleValue(samples, 'pg_queue_jobs', { queue: 'mail.send', state: 'completed' })).toBe((await statuses(main))['mail.send:completed']);
    expect(sampleValue(samples, 'pg_queue_jobs', { queue: 'reports.build', state: 'completed' })).toBe((await statuses(reportsDb))['reports.build:completed']);
    expect(sampleValue(samples, 'pg_queue_jobs', { queue: 'reports.build', state: 'failed' })).toBe(1);
  });

  it('health checks cover every database, each by name', async () => {
    const health = app.get(PgQueueHealthIndicator);
    const database = await health.checkDatabase('db');
    expect(database.db.status).toBe('up');
    expect(Object.keys(database.db.databases as object)).toEqual(['default', 'reports']);
    const loops = await health.checkClaimLoops('loops');
    expect(loops.loops).toEqual({ status: 'up', databases: { default: { status: 'up', loops: 1 }, reports: { status: 'up', loops: 1 } } });
    const progress = await health.checkProgress('progress');
    expect(progress.progress).toMatchObject({ status: 'up', databases: { default: { status: 'up', claims: 'up', eventLoop: 'up' }, reports: { status: 'up', claims: 'up', eventLoop: 'up' } } });
    await waitFor('ready', async () => (await health.isReady('ready')).ready.status === 'up');
    expect((await health.isReady('ready')).ready).toEqual({ status: 'up', database: 'up', listener: 'up', claims: 'up', eventLoop: 'up' });
    // A due job nobody can run yet (the queue paused): the lag check names its database.
    await app.get(QueueService).pause('reports.build');
    await app.get(QueueService).enqueue('reports.build', {});
    await reportsDb.query(`UPDATE background_jobs SET run_at = now() - interval '1 minute' WHERE status = 'queued'`);
    const lag = await health.checkLag('lag', { maxLagMs: 10_000 });
    expect(lag.lag.status).toBe('down');
    expect(lag.lag.message).toMatch(/^reports: queue "reports.build" lags \d+ ms \(max 10000\)$/);
    expect((lag.lag.databases as Record<string, { status: string }>).default.status).toBe('up');
    await app.get(QueueService).resume('reports.build');
    await waitFor('the late job ran', async () => (await statuses(reportsDb))['reports.build:queued'] === undefined);
  });

  it('a dashboard per database, each showing its own jobs and linking to the other', async () => {
    const page = async (path: string) => {
      const res = await fetch(base + path);
      expect(res.status).toBe(200);
      return res.text();
    };
    const reportIds = (await reportsDb.query<{ id: string }>(`SELECT id::text FROM background_jobs WHERE queue_name = 'reports.build' ORDER BY id`)).rows.map((r) => r.id);
    const reportsList = await page('/queues/reports/jobs?queue=reports.build');
    for (const id of reportIds) expect(reportsList).toContain(`href="/queues/reports/jobs/${id}"`);
    expect(reportsList).toContain('the report failed');
    // The default dashboard's overview lists the main database's queue, not the other's.
    const overview = await page('/queues/');
    expect(overview).toContain('mail.send');
    expect(overview).not.toContain('reports.build');
    // Both carry the switch between them, the current one marked.
    expect(overview).toMatch(/<nav class="databases" aria-label="Databases"><a href="\/queues\/" aria-current="page">default<\/a><a href="\/queues\/reports\/">reports<\/a><\/nav>/);
    expect(reportsList).toMatch(/<nav class="databases" aria-label="Databases"><a href="\/queues\/">default<\/a><a href="\/queues\/reports\/" aria-current="page">reports<\/a><\/nav>/);
    // The job page of a reports job comes from the reports database (the same id in main is another job, or none).
    const failedId = (await reportsDb.query<{ id: string }>(`SELECT id::text FROM background_jobs WHERE status = 'failed'`)).rows[0].id;
    expect(await page(`/queues/reports/jobs/${failedId}`)).toContain('the report failed');
  });

  it('a dashboard for a database no PgQueueModule is named after fails the boot, naming the ones there are', async () => {
    @Module({ imports: [PgQueueModule.forRoot({ connection: mainUrl, workers: false }), PgQueueDashboardModule.forRoot({ path: 'q', public: true, database: 'reprots' })] })
    class Misnamed {}
    await expect(NestFactory.create(Misnamed, { logger: false, abortOnError: false })).rejects.toThrow(/PgQueueDashboardModule: no PgQueueModule is named "reprots" \(the `database` option\)/);
  });

  it('the CLI reaches a database by name: --database reports reads DATABASE_URL_REPORTS', async () => {
    const stats = await runCli(['stats', '--database', 'reports', '--json'], { DATABASE_URL_REPORTS: reportsUrl });
    expect(stats.code).toBe(0);
    expect(Object.keys(JSON.parse(stats.stdout).queues)).toEqual(['reports.build']);
    const missing = await runCli(['stats', '--database', 'billing'], {});
    expect([missing.code, missing.stderr.trim()]).toEqual([2, 'pg-queue: no database "billing": set DATABASE_URL_BILLING to its postgres:// URL']);
    const both = await runCli(['stats', '--database', 'reports', '--url', reportsUrl], {});
    expect(both.stderr).toContain('give --url or --database, not both');
  });
});
