import { Injectable, Module, type DynamicModule, type LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { describe, expect, it } from '@jest/globals';
import { Interval, ScheduleModule } from '@nestjs/schedule';
import { PgQueueModule, QueueService } from 'nestjs-pg-queue';
import { JobStore } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { runQueueMigrations } from '../src/connection/run-queue-migrations.js';
import { DataSource } from 'typeorm';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

let ticks = 0;

@Injectable()
class Ticker {
  @Interval(100)
  tick() {
    ticks++;
  }
}

/** Keeps every log line, to assert on what the module said. */
class RecordingLogger implements LoggerService {
  readonly lines: { level: string; message: string }[] = [];
  log(message: unknown) { this.lines.push({ level: 'log', message: String(message) }); }
  error(message: unknown, ...rest: unknown[]) { this.lines.push({ level: 'error', message: [message, ...rest].map(String).join(' ') }); }
  warn(message: unknown) { this.lines.push({ level: 'warn', message: String(message) }); }
  debug() {}
  verbose() {}
}

async function startRecorded(imports: DynamicModule[], providers: (typeof Ticker)[] = []) {
  @Module({ imports, providers })
  class RecordedAppModule {}
  const logger = new RecordingLogger();
  const app = await NestFactory.createApplicationContext(RecordedAppModule, { logger, abortOnError: false });
  await app.init();
  return { app, logger };
}

/** A job claimed by a worker that vanished: its lease expires in 1 s and only the sweeper puts it back. */
async function orphanJob(app: Awaited<ReturnType<typeof startApp>>): Promise<string> {
  const id = await app.get(QueueService).enqueue('nobody-handles-this', {});
  const claim = await app.get(JobStore).claimJobs('nobody-handles-this', 1, 'vanished-worker', 1_000);
  expect(claim.jobs.map((j) => j.id)).toEqual([id]);
  return id;
}

describe('maintenance on @nestjs/schedule', () => {
  it('leaves the app’s own @Interval running once when the app imports ScheduleModule.forRoot(), and still sweeps', async () => {
    const url = await createTestDatabase('schedapp');
    const db = sqlPool(url);
    const app = await startApp(url, {
      providers: [Ticker],
      imports: [ScheduleModule.forRoot(), PgQueueModule.forRoot({ connection: url, workers: false, maintenance: { sweepIntervalMs: 100 } })],
    });
    const id = await orphanJob(app);
    ticks = 0;
    await new Promise((r) => setTimeout(r, 1_000));
    const perSecond = ticks;
    // Ten a second; twenty when a second ScheduleModule explorer mounts every @Interval again.
    expect(perSecond).toBeGreaterThanOrEqual(5); // loose below: a loaded CI machine delays timers
    expect(perSecond).toBeLessThanOrEqual(12);
    await waitFor('the sweeper requeued the orphan', async () => {
      const { rows } = await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id]);
      return rows[0].status === 'queued';
    });
    await app.close();
    await db.end();
  });

  it('sweeps in an app without ScheduleModule', async () => {
    const url = await createTestDatabase('schednone');
    const db = sqlPool(url);
    const app = await startApp(url, { queue: { workers: false, maintenance: { sweepIntervalMs: 100 } } });
    const id = await orphanJob(app);
    await waitFor('the sweeper requeued the orphan', async () => {
      const { rows } = await db.query(`SELECT status, last_error FROM background_jobs WHERE id = $1`, [id]);
      return rows[0].status === 'queued' && /lease expired: worker vanished-worker/.test(rows[0].last_error);
    });
    await app.close();
    await db.end();
  });

  it('warns once, naming the method, when an app has an @Interval method but no ScheduleModule.forRoot(); not when it has one', async () => {
    const url = await createTestDatabase('schedwarn');
    const queue = PgQueueModule.forRoot({ connection: url, workers: false, maintenance: { enabled: false } });
    const without = await startRecorded([queue], [Ticker]);
    const warnings = without.logger.lines.filter((l) => l.level === 'warn' && /ScheduleModule\.forRoot\(\)/.test(l.message));
    expect(warnings).toHaveLength(1);
    expect(warnings[0].message).toMatch(/Ticker\.tick .*Import ScheduleModule\.forRoot\(\)/);
    await without.app.close();
    const withSchedule = await startRecorded([ScheduleModule.forRoot(), PgQueueModule.forRoot({ connection: url, workers: false, maintenance: { enabled: false } })], [Ticker]);
    expect(withSchedule.logger.lines.filter((l) => /ScheduleModule\.forRoot\(\)/.test(l.message))).toEqual([]);
    await withSchedule.app.close();
    const noScheduledMethods = await startRecorded([PgQueueModule.forRoot({ connection: url, workers: false, maintenance: { enabled: false } })]);
    expect(noScheduledMethods.logger.lines.filter((l) => /ScheduleModule\.forRoot\(\)/.test(l.message))).toEqual([]);
    await noScheduledMethods.app.close();
  });

  it('shutdown during a long prune pass waits for the batch in progress and stops between batches: nothing queries the closed pool', async () => {
    const url = await createTestDatabase('pruneshutdown');
    const dataSource = new DataSource({ type: 'postgres', url });
    await dataSource.initialize();
    await runQueueMigrations(dataSource);
    await dataSource.destroy();
    const db = sqlPool(url);
    const total = 30_000;
    await db.query(`INSERT INTO background_jobs (queue_name, status, finished_at) SELECT 'done', 'completed', now() - interval '1 hour' FROM generate_series(1, $1::int)`, [total]);
    const { app, logger } = await startRecorded([
      PgQueueModule.forRoot({ connection: url, workers: false, migrationsRun: false, maintenance: { pruneIntervalMs: 10, pruneBatchSize: 20, completedRetentionMs: 0 } }),
    ]);
    const left = async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n as number;
    await waitFor('the pruner is deleting', async () => (await left()) < total, 10_000, 5);
    await app.close();
    const atClose = await left();
    await new Promise((r) => setTimeout(r, 500));
    const problems = logger.lines.filter((l) => l.level !== 'log');
    expect(problems).toEqual([]); // was: "pruner failed: Error: Cannot use a pool after calling end on the pool"
    expect(await left()).toBe(atClose); // stopped: nothing deleted after the close
    expect(atClose).toBeGreaterThan(0);
    await db.end();
  });
});
