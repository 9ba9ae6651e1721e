// Instance B of the connection-role suite (connection-roles-processes.spec.ts), as its own OS process: a Nest
// application context that runs the sweeper and a worker of queue 'long', whose handler writes every run to
// pool_runs (which instance, the attempt, start and end by the database clock), as the suite's instance A does.
// Jest does not run this file: build-worker.ts compiles it next to a build of the library, hence the relative
// import of the library's source.
//
// Protocol (IPC): { type: 'loaded' } once its code is read, then { type: 'start', config } -> { type: 'ready' }.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { JobHandler, PgQueueModule, type Job, type PgQueueModuleOptions } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';
import { recordedRun } from './pool-runs.js';

export interface PoolsWorkerConfig {
  url: string;
  workerId: string;
  queue: Omit<PgQueueModuleOptions, 'connection' | 'workerId' | 'dataSource'>;
}

let config!: PoolsWorkerConfig;
let records!: pg.Pool;

@Injectable()
class LongHandler {
  @JobHandler('long', { concurrency: 1 })
  async long(job: Job<{ ms: number }>) {
    await recordedRun(records, config.workerId, job);
  }
}

async function boot(): Promise<void> {
  records = new pg.Pool({ connectionString: config.url, max: 2 });
  records.on('error', () => undefined);

  @Module({
    imports: [PgQueueModule.forRoot({ migrationsRun: false, ...config.queue, connection: config.url, workerId: config.workerId })],
    providers: [LongHandler],
  })
  class PoolsWorkerModule {}

  const app = await NestFactory.createApplicationContext(PoolsWorkerModule, { logger: ['error'] });
  await app.init();
}

serveStart<{ type: string; config: PoolsWorkerConfig }>((message) => {
  config = message.config;
  return boot();
});
