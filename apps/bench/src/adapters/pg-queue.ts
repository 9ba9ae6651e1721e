import 'reflect-metadata';
import { Injectable, Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { JobHandler, PgQueueModule, QueueService, type Job } from 'nestjs-pg-queue';
import { DataSource } from 'typeorm';
import { flowPlan, type FlowPayload, type FlowResult } from './flow-shapes.js';
import { QUEUE, work, type Adapter, type AdapterOptions, type BenchPayload, type RunningSystem } from './types.js';

/**
 * Jobs held per worker process, running or prefetched. Measured on 20,000 no-op jobs: 100 in hand gave
 * 9.6k (c10) and 8.6k (c50) jobs/s, 300 gave 14.3k / 14.8k, 500 gave 15.0k / 15.1k (before the per-job
 * allocations were cut). Claims of 500 match graphile-worker's localQueue size in this benchmark.
 */
const IN_HAND = 500;

/** Where the handler reports to, and how long it works; set once per process before the app boots (one app per child process). */
let report: (payload: BenchPayload) => void = () => {};
let jobMs: number | undefined;
/** Set in the flows scenario only: the handler then runs flow jobs (runFlowJob). */
let flowJobEnd: ((payload: FlowPayload, parentsRead: number) => void) | undefined;

/** The modes scenario's steps per job (0: none). */
let steps = 0;

/**
 * The no-op handler, found by Nest discovery like any app's handler. Concurrency comes from forRoot's `queues`,
 * and so does `batch` (the modes scenario): the method then receives the jobs of one call.
 */
@Injectable()
class BenchHandler {
  @JobHandler(QUEUE)
  async handle(job: Job<BenchPayload> | Job<BenchPayload>[]): Promise<FlowResult | void> {
    if (Array.isArray(job)) {
      for (const one of job) report(one.payload);
      return;
    }
    report(job.payload);
    if (flowJobEnd) return runFlowJob(job as Job<FlowPayload>, flowJobEnd);
    for (let s = 0; s < steps; s++) await job.step(`s${s}`, () => s);
    await work(jobMs);
  }
}

/**
 * A flow job: a dependent reads its parents' results as an app would, with `job.parents()` (one query), and
 * counts those that completed with the result their ref gave; the job returns its own ref as its result.
 */
async function runFlowJob(job: Job<FlowPayload>, end: (payload: FlowPayload, parentsRead: number) => void): Promise<FlowResult> {
  let read = 0;
  if (job.payload.p > 0) {
    const parents = await job.parents();
    read = parents.filter((parent) => parent.status === 'completed' && (parent.result as FlowResult | null)?.r === parent.ref).length;
  }
  end(job.payload, read);
  return { r: job.payload.r };
}

@Module({})
class BenchAppModule {
  static forRoot(options: AdapterOptions): DynamicModule {
    return {
      module: BenchAppModule,
      imports: [
        // Library defaults for everything that is not a sizing knob: leases, heartbeats, fencing, the
        // sweeper and the pruner all stay on (the issue: no trading safety for speed).
        PgQueueModule.forRoot({
          // A transactional handler runs in a transaction of the app's DataSource (its own pool, as an app's).
          ...(options.mode?.transactional
            ? { dataSource: new DataSource({ type: 'postgres', url: options.url, extra: { max: options.poolSize } }), poolSize: options.poolSize }
            : { connection: { url: options.url, poolSize: options.poolSize } }),
          workers: options.role === 'worker',
          // prefetch: up to IN_HAND jobs claimed ahead of free slots, in claims of up to IN_HAND (the library's
          // option for many short jobs, as graphile-worker's localQueue is for it; the same 500 as its
          // localQueue here). Leases of prefetched jobs are held and renewed like running ones.
          queues: { [QUEUE]: queueOptions(options) },
          ...completedJobs(),
        }),
      ],
      providers: [BenchHandler],
    };
  }
}

/**
 * BENCH_PGQUEUE_COMPLETED=delete: completed jobs are deleted at completion (`completedRetentionMs: 0`), as
 * graphile-worker and the plain loop do with theirs; a like-for-like cell for the processing ratio. Default: kept
 * for the default retention, as an app that reads results and the dashboard would.
 */
function completedJobs(): { maintenance?: { completedRetentionMs: number } } {
  const mode = process.env.BENCH_PGQUEUE_COMPLETED;
  if (mode === undefined || mode === '' || mode === 'keep') return {};
  if (mode !== 'delete') throw new Error(`BENCH_PGQUEUE_COMPLETED must be "delete" or "keep"; got "${mode}"`);
  return { maintenance: { completedRetentionMs: 0 } };
}

function queueOptions(options: AdapterOptions) {
  if (options.limits) return limitedQueue(options);
  // The modes scenario: a batch handler (concurrency counts calls), or a transactional one.
  if (options.mode?.batch) return { concurrency: options.concurrency, batch: { size: options.mode.batch } };
  if (options.mode?.transactional) return { concurrency: options.concurrency, transactional: true };
  // What a user gets without tuning: a bare @JobHandler with the scenario's concurrency, every sizing knob at its default.
  if (options.librarySettings === 'defaults') return { concurrency: options.concurrency };
  return { concurrency: options.concurrency, prefetch: Math.max(0, IN_HAND - options.concurrency), batchSize: IN_HAND };
}

/**
 * The limits scenario: no prefetch (limits refuse it: a prefetched job would hold a slot), claims of one
 * turn of slots, and the limits asked for; `limits: {}` is the same sizing without limits, the reference.
 */
function limitedQueue(options: AdapterOptions) {
  const { globalConcurrency, concurrencyPerKey, fairness, prefetch } = options.limits!;
  return { concurrency: options.concurrency, batchSize: options.concurrency, globalConcurrency, concurrencyPerKey, fairness, prefetch };
}

/** The fairness scenario's jobs carry their tenant (`k`), enqueued as the job's concurrencyKey; others get `k${i % keys}` with limits.keys. */
function keyOf(payload: BenchPayload, keys: number | undefined): string | undefined {
  return payload.k ?? (keys ? `k${payload.i % keys}` : undefined);
}

/** nestjs-pg-queue through a real Nest application context, enqueueing through QueueService. */
export const pgQueueAdapter: Adapter = {
  async start(options: AdapterOptions): Promise<RunningSystem> {
    report = options.onJob;
    jobMs = options.jobMs;
    flowJobEnd = options.onFlowJobEnd;
    steps = options.mode?.steps ?? 0;
    const app = await NestFactory.createApplicationContext(BenchAppModule.forRoot(options), { logger: ['error', 'warn'] });
    const queue = app.get(QueueService);
    const keys = options.limits?.keys;
    if (options.limits) {
      return {
        enqueue: async (payload) => void (await queue.enqueue(QUEUE, payload, { concurrencyKey: keyOf(payload, keys) })),
        enqueueMany: async (payloads) => (await queue.enqueueMany(payloads.map((payload) => ({ queue: QUEUE, payload, concurrencyKey: keyOf(payload, keys) })))).length,
        stop: () => app.close(),
      };
    }
    return {
      enqueue: async (payload) => void (await queue.enqueue(QUEUE, payload)),
      enqueueMany: async (payloads) => (await queue.enqueueMany(payloads.map((payload) => ({ queue: QUEUE, payload })))).length,
      // Any DAG in one statement: each job names its parents by ref; a job with parents waits, blocked, until they completed.
      enqueueFlow: async (shape, sizes, flow) =>
        void (await queue.enqueueFlow({
          jobs: flowPlan(shape, sizes, 'dag', flow).map((job) => ({ ref: job.ref, queue: QUEUE, payload: job.payload, dependsOn: job.parents })),
        })),
      stop: () => app.close(),
    };
  },
};
