import 'reflect-metadata';
import { Injectable, Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { JobHandler, PgQueueModule, QueueService, type Job } from 'nestjs-pg-queue';
import { QUEUE, type Adapter, type AdapterOptions, type BenchPayload, type RunningSystem } from './types.js';

/** Where the handler reports to; set once per process before the app boots (one app per child process). */
let report: (payload: BenchPayload) => void = () => {};

/** The no-op handler, found by Nest discovery like any app's handler. Concurrency comes from forRoot's `queues`. */
@Injectable()
class BenchHandler {
  @JobHandler(QUEUE)
  async handle(job: Job<BenchPayload>): Promise<void> {
    report(job.payload);
  }
}

@Module({})
class BenchAppModule {
  static forRoot(options: AdapterOptions): DynamicModule {
    return {
      module: BenchAppModule,
      imports: [
        // Library defaults for everything that is not a sizing knob: leases, heartbeats, fencing, the
        // sweeper and the pruner all stay on (the issue: no trading safety for speed). batchSize is the
        // library's default too (concurrency + prefetch, at most 100).
        PgQueueModule.forRoot({
          connection: { url: options.url, poolSize: options.poolSize },
          workers: options.role === 'worker',
          // prefetch: claim a batch of 100 ahead of free slots (the library's option for many short jobs, as
          // graphile-worker's localQueue is for it); leases of prefetched jobs are held and renewed.
          queues: { [QUEUE]: { concurrency: options.concurrency, prefetch: Math.max(0, 100 - options.concurrency) } },
        }),
      ],
      providers: [BenchHandler],
    };
  }
}

/** nestjs-pg-queue through a real Nest application context, enqueueing through QueueService. */
export const pgQueueAdapter: Adapter = {
  async start(options: AdapterOptions): Promise<RunningSystem> {
    report = options.onJob;
    const app = await NestFactory.createApplicationContext(BenchAppModule.forRoot(options), { logger: ['error', 'warn'] });
    const queue = app.get(QueueService);
    return {
      enqueue: async (payload) => void (await queue.enqueue(QUEUE, payload)),
      enqueueMany: async (payloads) => void (await queue.enqueueMany(payloads.map((payload) => ({ queue: QUEUE, payload })))),
      stop: () => app.close(),
    };
  },
};
