// The processes of event-stream-processes.spec.ts. ROLE=worker: a worker of 'evp-work' whose handler fails the first
// attempt of every fifth job. ROLE=producer: no workers; once started it enqueues JOBS jobs one at a time (each its
// own transaction, so that commits interleave with the worker's), and is ready when all are in. Jest does not run
// this file: buildWorker compiles it next to a build of the library and the spec forks it. Protocol (IPC):
// { type: 'loaded' }, then { type: 'start', url } boots the app and answers { type: 'ready' }.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { JobHandler, PgQueueModule, QueueService, type Job } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

@Injectable()
class EventWorkerHandlers {
  @JobHandler('evp-work', { concurrency: 8, maxAttempts: 3, backoff: { baseMs: 0, jitter: false } })
  async work(job: Job<{ n: number }>) {
    if (job.payload.n % 5 === 0 && job.attempt === 1) throw new Error(`first attempt of ${job.payload.n}`);
  }
}

async function start(url: string): Promise<void> {
  const worker = process.env.ROLE === 'worker';
  @Module({
    imports: [PgQueueModule.forRoot({ connection: url, workers: worker, maintenance: { enabled: worker }, recurring: { enabled: false } })],
    providers: worker ? [EventWorkerHandlers] : [],
  })
  class EventProcessModule {}
  const app = await NestFactory.createApplicationContext(EventProcessModule, { logger: ['error'], abortOnError: false });
  await app.init();
  process.once('SIGTERM', () => void app.close().finally(() => process.exit(0)));
  if (!worker) {
    const queue = app.get(QueueService);
    for (let n = 1; n <= Number(process.env.JOBS); n++) await queue.enqueue('evp-work', { n });
  }
}

serveStart<{ type: string; url: string }>((message) => start(message.url));
