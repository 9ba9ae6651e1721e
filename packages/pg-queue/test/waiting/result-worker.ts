// The worker of wait-for-processes.spec.ts, as its own OS process: a Nest application context whose handlers
// return results and report progress. Jest does not run this file: buildWorker compiles it next to a build of
// the library and the spec forks it. Protocol (IPC): { type: 'loaded' }, then { type: 'start', url } boots the
// app and answers { type: 'ready' }; SIGTERM closes it.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { setTimeout as sleep } from 'node:timers/promises';
import { JobHandler, PgQueueModule, type Job } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

@Injectable()
class ResultHandlers {
  @JobHandler('xp-report')
  async report(job: Job<{ steps: number }>) {
    for (let step = 1; step <= job.payload.steps; step++) {
      await sleep(50);
      job.progress(step);
    }
    return { pid: process.pid, steps: job.payload.steps };
  }

  @JobHandler('xp-fail', { maxAttempts: 1 })
  async fail() {
    throw new Error(`refused in process ${process.pid}`);
  }
}

async function start(url: string): Promise<void> {
  @Module({
    imports: [PgQueueModule.forRoot({ connection: url, poolSize: 3, leaseMs: 1_000, heartbeatMs: 100, maintenance: { enabled: false }, recurring: { enabled: false } })],
    providers: [ResultHandlers],
  })
  class ResultWorkerModule {}
  const app = await NestFactory.createApplicationContext(ResultWorkerModule, { logger: false, abortOnError: false });
  await app.init();
  process.once('SIGTERM', () => void app.close().finally(() => process.exit(0)));
}

serveStart<{ type: string; url: string }>((message) => start(message.url));
