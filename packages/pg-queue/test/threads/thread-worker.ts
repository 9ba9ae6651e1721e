// A worker process of the thread handlers' spec (thread-handlers-processes.spec.ts): thread handlers of several
// kinds beside a plain queue ('quick') whose handler records when each of its jobs started (database clock). Jest does
// not run this file: build-worker.ts compiles it (and cpu.thread.ts, the thread file) next to a build of the library.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { JobHandler, PgQueueModule, type Job, type PgQueueModuleOptions } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

export interface ThreadWorkerConfig {
  url: string;
  workerId: string;
  queue: Omit<PgQueueModuleOptions, 'connection' | 'workerId' | 'dataSource'>;
}

const file = new URL('./cpu.thread.js', import.meta.url);
let records!: pg.Pool;

@Injectable()
class ThreadHandlers {
  // Two threads; the 10 s job and the two-process runs.
  @JobHandler('cpu', { thread: { file, poolSize: 2 } })
  cpu(): void {}

  // One thread, a short grace: cancel terminates it and the next job runs on a new one.
  @JobHandler('cpu_cancel', { thread: { file, poolSize: 1, abortGraceMs: 300 }, maxAttempts: 1 })
  cancel(): void {}

  // 2 s: the next job after a timeout starts a new thread (its imports, its connection) within its timeout under npm test's load.
  @JobHandler('cpu_timeout', { thread: { file, poolSize: 1, abortGraceMs: 300 }, timeoutMs: 2_000, maxAttempts: 1 })
  timeout(): void {}

  // The same timeout with a long grace: a loop that checks job.signal.aborted stops at the abort and keeps its thread. With
  // the 300 ms above, a thread starved on the loaded machine (two suites at once, round 13c) was terminated before it
  // got to its check; the grace tells a thread that stops apart from one that does not, not how fast it stops.
  @JobHandler('cpu_coop', { thread: { file, poolSize: 1, abortGraceMs: 10_000 }, timeoutMs: 2_000, maxAttempts: 1 })
  coop(): void {}

  // Crashes, throws and unclonable results, each failing its only attempt; 64 MB of heap per thread.
  @JobHandler('cpu_crash', { thread: { file, poolSize: 1, resourceLimits: { maxOldGenerationSizeMb: 64 } }, maxAttempts: 1 })
  crash(): void {}

  @JobHandler('quick')
  async quick(job: Job): Promise<void> {
    await records.query(`INSERT INTO quick_runs (job_id, worker, started_at) VALUES ($1, $2, clock_timestamp())`, [job.id, process.pid]);
  }
}

serveStart<{ type: string; config: ThreadWorkerConfig }>(async ({ config }) => {
  process.env.THREAD_TEST_URL = config.url; // the thread file's own connection
  records = new pg.Pool({ connectionString: config.url, max: 2 });
  records.on('error', () => undefined);

  @Module({
    imports: [PgQueueModule.forRoot({ migrationsRun: false, ...config.queue, connection: { url: config.url, poolSize: 3 }, workerId: config.workerId })],
    providers: [ThreadHandlers],
  })
  class ThreadWorkerModule {}

  const app = await NestFactory.createApplicationContext(ThreadWorkerModule, { logger: ['error'] });
  await app.init();
  process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
});
