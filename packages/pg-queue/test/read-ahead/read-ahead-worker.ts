// One worker of the read-ahead suite (read-ahead-promises.spec.ts), as its own OS process: a Nest application
// context whose handler of queue 'q' writes every start to ra_runs (the attempt the handler was given, the
// payload it saw, and the start and end by the database clock), so that the suite reads back which jobs
// started where and when. Jest does not run this file: build-worker.ts compiles it next to a build of the
// library, hence the relative import of the library's source.
//
// Protocol (IPC): { type: 'loaded' } once its code is read, then { type: 'start', config } -> { type: 'ready' }.
// Once ready it also answers { type: 'pause' } (QueueService.pause('q') in this process, then how many handlers
// had been called when it returned and the database clock just after: { type: 'paused', startsBefore, at }) and { type: 'close' } (records the database clock in
// ra_events, then app.close(): { type: 'closed' }).
import 'reflect-metadata';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { JobHandler, PgQueueModule, QueueService, type Job, type PgQueueModuleOptions } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

export interface ReadAheadWorkerConfig {
  /** The queue's connection (possibly through a TcpProxy the suite cuts). */
  url: string;
  /** Where runs are recorded: straight to the database, so that a cut queue connection still records its starts. */
  recordsUrl: string;
  workerId: string;
  queue: Omit<PgQueueModuleOptions, 'connection' | 'workerId' | 'dataSource'>;
}

/**
 * What a job of queue 'q' does: sleep `ms` (ignoring its signal, as a busy handler would), or never return. The
 * flows' queues of start-marks-processes.spec.ts: 'ra-step' does the same, or fails at once (`fail`); 'ra-undo', a
 * step's compensation, records its run (its payload names the step it undoes: `undo`).
 */
export interface ReadAheadPayload {
  ms?: number;
  hang?: boolean;
  fail?: boolean;
  undo?: string;
  /** Anything the test wants to see again in ra_runs (the payload is recorded whole). */
  v?: string;
}

let config!: ReadAheadWorkerConfig;
let records!: pg.Pool;
let app!: INestApplicationContext;
/** Handler calls so far, counted synchronously as each starts. */
let starts = 0;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const forever = new Promise<never>(() => undefined);

@Injectable()
class ReadAheadHandlers {
  // Defaults only: every test sets its own concurrency, prefetch and maxAttempts through `queues.q`.
  @JobHandler('q')
  q(job: Job<ReadAheadPayload>) {
    return run(job);
  }

  @JobHandler('ra-step', { maxAttempts: 1 })
  step(job: Job<ReadAheadPayload>) {
    return run(job);
  }

  @JobHandler('ra-undo')
  undo(job: Job<ReadAheadPayload>) {
    return run(job);
  }
}

async function run(job: Job<ReadAheadPayload>): Promise<void> {
  starts += 1;
  // row_locked_by: who holds the row as the handler starts (a job started on a claim this worker lost is not its own).
  const { rows } = await records.query<{ id: string }>(
    `INSERT INTO ra_runs (job_id, attempt, worker, payload, row_locked_by)
     SELECT $1, $2, $3, $4, (SELECT locked_by FROM background_jobs WHERE id = $1) RETURNING id`,
    [job.id, job.attempt, config.workerId, JSON.stringify(job.payload)],
  );
  if (job.payload.hang) return forever;
  if (job.payload.fail) throw new Error('this step fails');
  await sleep(job.payload.ms ?? 0);
  await records.query('UPDATE ra_runs SET ended_at = clock_timestamp() WHERE id = $1', [rows[0].id]);
}

async function now(): Promise<string> {
  const { rows } = await records.query<{ at: string }>('SELECT clock_timestamp()::text AS at');
  return rows[0].at;
}

async function boot(): Promise<void> {
  records = new pg.Pool({ connectionString: config.recordsUrl, max: 8 });
  records.on('error', () => undefined);

  @Module({
    imports: [PgQueueModule.forRoot({ migrationsRun: false, ...config.queue, connection: { url: config.url, poolSize: 4 }, workerId: config.workerId })],
    providers: [ReadAheadHandlers],
  })
  class ReadAheadWorkerModule {}

  app = await NestFactory.createApplicationContext(ReadAheadWorkerModule, { logger: ['error', 'warn'] });
  await app.init();
  process.on('message', (message: { type: string }) => {
    if (message.type === 'pause') {
      void app
        .get(QueueService)
        .pause('q')
        .then(() => {
          const startsBefore = starts; // the handlers called before pause() returned
          return now().then((at) => process.send?.({ type: 'paused', at, startsBefore }));
        });
    } else if (message.type === 'close') {
      void records
        .query(`INSERT INTO ra_events (worker, event) VALUES ($1, 'close')`, [config.workerId])
        .then(() => app.close())
        .then(() => process.send?.({ type: 'closed' }));
    }
  });
}

serveStart<{ type: string; config: ReadAheadWorkerConfig }>((message) => {
  config = message.config;
  return boot();
});
