// One instance of recurring-processes.spec.ts, as its own OS process: a Nest application context whose
// provider declares recurring jobs. Jest does not run this file: build-recurring-worker.ts compiles it next to
// a build of the library, and the spec forks it. Protocol (IPC), as the fault suite's worker: { type: 'loaded' },
// then { type: 'start', config } boots the app and answers { type: 'ready' }; SIGTERM closes it.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { PgQueueModule, RecurringJob, type Job, type MissedFires, type RecurringJobOptions } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

export interface RecurringWorkerConfig {
  url: string;
  /** Schedule name to missed-fire policy; every schedule fires each second into the queue of its name. */
  schedules: Record<string, MissedFires>;
  /** More schedules, name to the decorator's options (`every` or `cron`, limit, dates as ISO text), each into the queue of its name. */
  decorated?: Record<string, RecurringJobOptions>;
}

function handlersFor(schedules: Record<string, MissedFires>, decorated: Record<string, RecurringJobOptions> = {}) {
  @Injectable()
  class RecurringHandlers {}
  // One method per schedule, decorated as an app would write it, but with names and policies from the config.
  for (const [name, missedFires] of Object.entries(schedules)) {
    const method = async (_job: Job) => undefined;
    Object.defineProperty(RecurringHandlers.prototype, name, { value: method, writable: true, configurable: true });
    const descriptor = Object.getOwnPropertyDescriptor(RecurringHandlers.prototype, name)!;
    RecurringJob('* * * * * *', { name, missedFires, concurrency: 4 })(RecurringHandlers.prototype, name, descriptor);
  }
  for (const [name, options] of Object.entries(decorated)) {
    const method = async (_job: Job) => undefined;
    Object.defineProperty(RecurringHandlers.prototype, name, { value: method, writable: true, configurable: true });
    const descriptor = Object.getOwnPropertyDescriptor(RecurringHandlers.prototype, name)!;
    RecurringJob({ ...options, name, concurrency: 4 } as RecurringJobOptions & { every: number })(RecurringHandlers.prototype, name, descriptor);
  }
  return RecurringHandlers;
}

async function start(config: RecurringWorkerConfig): Promise<void> {
  @Module({
    imports: [PgQueueModule.forRoot({ connection: config.url, poolSize: 3, maintenance: { enabled: false }, recurring: { pollIntervalMs: 200 } })],
    providers: [handlersFor(config.schedules, config.decorated)],
  })
  class RecurringWorkerModule {}
  const app = await NestFactory.createApplicationContext(RecurringWorkerModule, { logger: ['error'], abortOnError: false });
  await app.init();
  process.once('SIGTERM', () => void app.close().finally(() => process.exit(0)));
}

serveStart<{ type: string; config: RecurringWorkerConfig }>((message) => start(message.config));
