import type { ModuleRef } from '@nestjs/core';
import { PgQueueConnection } from '../connection/pg-queue-connection.js';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import { JobEvents } from '../events/job-events.js';
import { RESOLVED_OPTIONS } from '../pg-queue.module-definition.js';
import { MetricsStore } from '../store/metrics.store.js';
import { InstanceStore } from '../store/instance.store.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import { WorkerPool } from '../worker/worker-pool.js';
import { NO_PG_QUEUE_MODULE } from './metrics.messages.js';

/** What metrics and health checks read of the app's PgQueueModule. */
export interface QueueInternals {
  events: JobEvents;
  workers: WorkerPool;
  options: ResolvedModuleOptions;
  store: MetricsStore;
  /** The instances registry (checkInstances). */
  instances: InstanceStore;
  /** The queues this instance processes (its @JobHandler queues; none when workers are off). Complete from onApplicationBootstrap on. */
  workerQueues(): string[];
}

/**
 * Finds the app's PgQueueModule providers wherever the module was imported (`strict: false`), so the metrics and
 * health modules work whether or not PgQueueModule is global, and PgQueueModule exports none of its internals.
 * Called from onModuleInit, once every provider of the app exists.
 */
export function findQueueInternals(moduleRef: ModuleRef, who: string): QueueInternals {
  try {
    const get = <T>(token: unknown) => moduleRef.get<T>(token as string, { strict: false });
    const options = get<ResolvedModuleOptions>(RESOLVED_OPTIONS);
    const registry = get<JobHandlerRegistry>(JobHandlerRegistry);
    return {
      events: get<JobEvents>(JobEvents),
      workers: get<WorkerPool>(WorkerPool),
      options,
      store: new MetricsStore(get<PgQueueConnection>(PgQueueConnection).pool),
      instances: new InstanceStore(get<PgQueueConnection>(PgQueueConnection).pool, { transactionPooler: options.transactionPooler }),
      workerQueues: () => (options.workers ? registry.all().map((h) => h.queue) : []),
    };
  } catch (error) {
    throw new PgQueueError(NO_PG_QUEUE_MODULE(who), { cause: error });
  }
}
