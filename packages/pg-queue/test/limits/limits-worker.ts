// One worker of the limits suite (limits-processes.spec.ts), as its own OS process: a Nest application
// context whose handlers write every run to limit_runs (its claim time, and its start and end by the database
// clock), so the suite reads back what ran when. Jest does not run this file: build-worker.ts compiles it
// next to a build of the library, hence the relative import of the library's source.
//
// Protocol (IPC): { type: 'loaded' } once its code is read, then { type: 'start', config } -> { type: 'ready' }.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { JobHandler, PgQueueModule, RateLimitedError, type BatchJob, type Job, type PgQueueModuleOptions } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

export interface LimitsWorkerConfig {
  url: string;
  workerId: string;
  queue: Omit<PgQueueModuleOptions, 'connection' | 'workerId' | 'dataSource'>;
}

let config!: LimitsWorkerConfig;
let records!: pg.Pool;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Records the run; claimed_at is the row's locked_at, the instant the claim (which the rate limit counts) took it, and
 * marked_at its updated_at as the handler finds it: when the database said it started (the claim that started it, or
 * the start mark of a job from the buffer), which the handler's own start (started_at) follows by however long the
 * process takes to call it.
 */
async function run(job: Job<{ ms: number }>): Promise<void> {
  const { rows } = await records.query<{ id: string }>(
    `INSERT INTO limit_runs (job_id, queue, attempt, worker, pid, concurrency_key, claimed_at, marked_at, started_at)
     SELECT id, queue_name, $2, $3, $4, concurrency_key, locked_at, updated_at, clock_timestamp() FROM background_jobs WHERE id = $1
     RETURNING id`,
    [job.id, job.attempt, config.workerId, process.pid],
  );
  await sleep(job.payload.ms);
  await records.query(`UPDATE limit_runs SET ended_at = clock_timestamp() WHERE id = $1`, [rows[0].id]);
}

let calls = 0;

/**
 * A batch handler's call: every job of it recorded as running from the call's start to its end, under the call's
 * number in this process (call_no), which tells the calls apart. (Their start times do not: two calls that start
 * together on two connections can read the same microsecond.)
 */
async function runBatch(jobs: BatchJob<{ ms: number }>[]): Promise<void> {
  const call = ++calls;
  const { rows } = await records.query<{ id: string }>(
    `INSERT INTO limit_runs (job_id, queue, attempt, worker, pid, concurrency_key, claimed_at, marked_at, started_at, call_no)
     SELECT j.id, j.queue_name, a.attempt, $3, $4, j.concurrency_key, j.locked_at, j.updated_at, statement_timestamp(), $5
     FROM background_jobs AS j JOIN unnest($1::int8[], $2::int[]) AS a(id, attempt) ON a.id = j.id
     RETURNING id`,
    [jobs.map((j) => j.id), jobs.map((j) => j.attempt), config.workerId, process.pid, call],
  );
  await sleep(Math.max(...jobs.map((j) => j.payload.ms)));
  await records.query(`UPDATE limit_runs SET ended_at = clock_timestamp() WHERE id = ANY($1::int8[])`, [rows.map((r) => r.id)]);
}

// The limits themselves come from the suite through `queues` (module options), per scenario.
@Injectable()
class LimitHandlers {
  @JobHandler('global')
  async global(job: Job<{ ms: number }>) {
    await run(job);
  }

  @JobHandler('rated')
  async rated(job: Job<{ ms: number }>) {
    await run(job);
  }

  @JobHandler('keyed')
  async keyed(job: Job<{ ms: number }>) {
    await run(job);
  }

  // Fair share across keys (fairness, weights and per-key caps from the suite's `queues`: fair-share.spec.ts).
  @JobHandler('fair')
  async fair(job: Job<{ ms: number }>) {
    await run(job);
  }

  // Limits changed at runtime (runtime-limits-processes.spec.ts): no limit in the decorator. A job whose payload asks
  // for it throws RateLimitedError once (its first run records it in limit_429s), as a partner's 429 would.
  @JobHandler('runtime')
  async runtime(job: Job<{ ms: number; rateLimitedMs?: number; key?: string }>) {
    const ask = job.payload.rateLimitedMs;
    if (ask !== undefined) {
      const { rowCount } = await records.query(
        `INSERT INTO limit_429s (job_id, worker, at) VALUES ($1, $2, clock_timestamp()) ON CONFLICT (job_id) DO NOTHING`,
        [job.id, config.workerId],
      );
      if (rowCount === 1) throw new RateLimitedError(ask, job.payload.key === undefined ? {} : { key: job.payload.key });
    }
    await run(job);
  }

  // A batch handler (batch: { size } from the suite's `queues`): limits count its jobs, not its calls.
  @JobHandler('globalbatch', { batch: { size: 5 } })
  async globalBatch(jobs: BatchJob<{ ms: number }>[]) {
    await runBatch(jobs);
  }
}

async function boot(): Promise<void> {
  records = new pg.Pool({ connectionString: config.url, max: 4 });
  records.on('error', () => undefined);

  @Module({
    imports: [PgQueueModule.forRoot({ migrationsRun: false, ...config.queue, connection: { url: config.url, poolSize: 3 }, workerId: config.workerId })],
    providers: [LimitHandlers],
  })
  class LimitsWorkerModule {}

  const app = await NestFactory.createApplicationContext(LimitsWorkerModule, { logger: ['error'] });
  await app.init();
}

serveStart<{ type: string; config: LimitsWorkerConfig }>((message) => {
  config = message.config;
  return boot();
});
