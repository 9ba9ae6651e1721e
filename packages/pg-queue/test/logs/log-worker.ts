// The worker of job-logs-processes.spec.ts, as its own OS process. Its handler logs three lines (job.log()), then, with
// HOLD=1 in its environment, waits for ever (the spec SIGKILLs it there, once a heartbeat has written the lines);
// otherwise it logs one more line and completes. Jest does not run this file: buildWorker compiles it next to a build
// of the library and the spec forks it. Protocol (IPC): { type: 'loaded' }, then { type: 'start', url } boots the app
// and answers { type: 'ready' }.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { JobHandler, PgQueueModule, type Job } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

@Injectable()
class LogWorkerHandlers {
  @JobHandler('lx-work', { concurrency: 4, backoff: { baseMs: 0, jitter: false } })
  async work(job: Job<{ n: number }>) {
    for (let i = 1; i <= 3; i++) job.log(`attempt ${job.attempt} (pid ${process.pid}): step ${i} of job ${job.payload.n}`);
    if (process.env.HOLD === '1') await new Promise(() => undefined); // killed here
    job.log(`attempt ${job.attempt} (pid ${process.pid}): done`);
    return { pid: process.pid };
  }
}

async function start(url: string): Promise<void> {
  @Module({
    imports: [
      PgQueueModule.forRoot({
        connection: url,
        leaseMs: 2_000,
        heartbeatMs: 300,
        jobLogs: { maxLines: 50 },
        maintenance: { sweepIntervalMs: 200 },
        recurring: { enabled: false },
      }),
    ],
    providers: [LogWorkerHandlers],
  })
  class LogWorkerModule {}
  const app = await NestFactory.createApplicationContext(LogWorkerModule, { logger: ['error'], abortOnError: false });
  await app.init();
  process.once('SIGTERM', () => void app.close().finally(() => process.exit(0)));
}

serveStart<{ type: string; url: string }>((message) => start(message.url));
