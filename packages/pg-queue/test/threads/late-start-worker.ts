// The worker process of thread-start-deadline-processes.spec.ts: two thread handlers whose file loads slowly (queues
// 'slow' and 'slow_stalled', a pool of one thread each, so each one's first job waits for a load of its own) and a
// main-thread handler that blocks this process's event loop for the payload's ms (queue 'block'): a stall of the
// process that holds the thread's job. Jest does not run this file:
// build-worker.ts compiles it (and slow-load.thread.ts) next to a build of the library.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { JobHandler, PgQueueModule, type Job, type PgQueueModuleOptions } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

export interface LateStartWorkerConfig {
  url: string;
  workerId: string;
  slowLoadMs: number;
  queue: Omit<PgQueueModuleOptions, 'connection' | 'workerId' | 'dataSource'>;
}

const file = new URL('./slow-load.thread.js', import.meta.url);

@Injectable()
class LateStartHandlers {
  @JobHandler('slow', { thread: { file, poolSize: 1 }, maxAttempts: 3, backoff: () => 100 })
  slow(): void {}

  @JobHandler('slow_stalled', { thread: { file, poolSize: 1 }, maxAttempts: 3, backoff: () => 100 })
  slowStalled(): void {}

  @JobHandler('block')
  block(job: Job<{ ms: number }>): void {
    const until = Date.now() + job.payload.ms;
    while (Date.now() < until) {
      // The event loop stops: no heartbeat, no message from the thread is heard.
    }
  }
}

serveStart<{ type: string; config: LateStartWorkerConfig }>(async ({ config }) => {
  process.env.THREAD_TEST_URL = config.url; // the thread file's own connection
  process.env.SLOW_LOAD_MS = String(config.slowLoadMs);

  @Module({
    imports: [PgQueueModule.forRoot({ migrationsRun: false, ...config.queue, connection: { url: config.url, poolSize: 3 }, workerId: config.workerId })],
    providers: [LateStartHandlers],
  })
  class LateStartWorkerModule {}

  const app = await NestFactory.createApplicationContext(LateStartWorkerModule, { logger: ['error'] });
  await app.init();
  process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
});
