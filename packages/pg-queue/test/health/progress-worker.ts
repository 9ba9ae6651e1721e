// A process of health-processes.spec.ts: a worker of queue 'pk-work' with short leases and a fast heartbeat, so that
// its row in background_instances expires soon after it is killed. Jest does not run this file: buildWorker compiles
// it next to a build of the library and the spec forks it. Protocol (IPC, serve-start.ts): { type: 'loaded' },
// { type: 'start', url, workerId } boots it and answers { type: 'ready' }; SIGTERM stops it cleanly, SIGKILL does not.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { JobHandler, PgQueueModule } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

@Injectable()
class Handlers {
  @JobHandler('pk-work', { concurrency: 2 })
  async work() {}
}

serveStart<{ type: string; url: string; workerId: string }>(async ({ url, workerId }) => {
  @Module({
    imports: [
      PgQueueModule.forRoot({ connection: url, workerId, leaseMs: 2_000, heartbeatMs: 300, pollIntervalMs: 500, maintenance: { enabled: false }, recurring: { enabled: false } }),
    ],
    providers: [Handlers],
  })
  class ProgressWorkerModule {}
  const app = await NestFactory.createApplicationContext(ProgressWorkerModule, { logger: ['error'], abortOnError: false });
  app.enableShutdownHooks();
  await app.init();
});
