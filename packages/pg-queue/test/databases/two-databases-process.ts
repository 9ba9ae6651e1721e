// A process of several-databases-processes.spec.ts: a Nest application context with two PgQueueModules, the default
// one on `main` and a named one ("reports") on another database, each with a handler that records each run in its
// own database's `runs` table (job id and pid), then works for a while. Jest does not run this file: buildWorker
// compiles it next to a build of the library and the spec forks it. Protocol (IPC): { type: 'loaded' }, then
// { type: 'start', url, reportsUrl, role } boots the app and answers { type: 'ready' }; a producer (workers off)
// then takes { type: 'enqueue', jobs } and answers { type: 'enqueued', main, reports } (the ids per queue).
import 'reflect-metadata';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { JobHandler, PgQueueModule, QueueService, type Job } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

let mainRuns: pg.Pool;
let reportsRuns: pg.Pool;
const JOB_MS = 20;

async function run(pool: pg.Pool, job: Job): Promise<void> {
  await pool.query(`INSERT INTO runs (job_id, pid) VALUES ($1, $2)`, [job.id, process.pid]);
  await new Promise((resolve) => setTimeout(resolve, JOB_MS));
}

@Injectable()
class TwoDatabaseHandlers {
  @JobHandler('sd-main', { concurrency: 4 })
  async main(job: Job) {
    await run(mainRuns, job);
  }

  @JobHandler('sd-reports', { concurrency: 4 })
  async reports(job: Job) {
    await run(reportsRuns, job);
  }
}

type Start = { type: string; url: string; reportsUrl: string; role: 'worker' | 'producer' };

async function start({ url, reportsUrl, role }: Start): Promise<void> {
  const worker = role === 'worker';
  // Short leases and a quick sweeper, so that a killed process's jobs go to the other one within seconds.
  const common = { workers: worker, leaseMs: 2_000, heartbeatMs: 500, maintenance: { sweepIntervalMs: 500 }, recurring: { enabled: false } } as const;
  @Module({
    imports: [
      PgQueueModule.forRoot({ ...common, connection: url }),
      PgQueueModule.forRoot({ ...common, name: 'reports', connection: reportsUrl, queues: { 'sd-reports': {} } }),
    ],
    providers: worker ? [TwoDatabaseHandlers] : [],
  })
  class TwoDatabasesProcessModule {}
  mainRuns = new pg.Pool({ connectionString: url, max: 4 });
  reportsRuns = new pg.Pool({ connectionString: reportsUrl, max: 4 });
  const app: INestApplicationContext = await NestFactory.createApplicationContext(TwoDatabasesProcessModule, { logger: ['error', 'warn'], abortOnError: false });
  await app.init();
  if (!worker) {
    const queue = app.get(QueueService);
    process.on('message', (message: { type: string; jobs: number }) => {
      if (message.type !== 'enqueue') return;
      // One enqueueMany per database (a call's jobs must live in one), routed by the default service.
      const batch = (name: string) => Array.from({ length: message.jobs }, (_, i) => ({ queue: name, payload: { i } }));
      void Promise.all([queue.enqueueMany(batch('sd-main')), queue.enqueueMany(batch('sd-reports'))]).then(
        ([main, reports]) => process.send?.({ type: 'enqueued', main, reports }),
        (error: unknown) => process.send?.({ type: 'enqueued', error: String(error) }),
      );
    });
  }
  process.once('SIGTERM', () => void app.close().then(() => Promise.all([mainRuns.end(), reportsRuns.end()])).finally(() => process.exit(0)));
}

serveStart<Start>(start);
