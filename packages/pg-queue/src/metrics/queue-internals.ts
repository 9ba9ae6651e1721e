import type { ModuleRef } from '@nestjs/core';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { JobEvents } from '../events/job-events.js';
import type { QueueDatabase } from '../databases/queue-database.js';
import { QueueDatabases } from '../databases/queue-databases.js';
import { MetricsStore } from '../store/metrics.store.js';
import { InstanceStore } from '../store/instance.store.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import type { WorkerPool } from '../worker/worker-pool.js';
import { NO_PG_QUEUE_MODULE } from './metrics.messages.js';

/** What metrics and health checks read of one of the app's PgQueueModule instances (one per database). */
export interface QueueInternals {
  /** The database's name ('default' for the module without a name). */
  database: string;
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
 * Finds the app's PgQueueModule instances, one per database, wherever they were imported (`strict: false`), so the
 * metrics and health modules work whether or not PgQueueModule is global, and cover every database of an app that has
 * several (docs/guides/several-databases.md). Called from onModuleInit, once every provider of the app exists.
 */
export function findQueueInternals(moduleRef: ModuleRef, who: string): QueueInternals[] {
  let databases: QueueDatabase[];
  try {
    databases = moduleRef.get<QueueDatabases, QueueDatabases<QueueDatabase>>(QueueDatabases, { strict: false }).all();
  } catch (error) {
    throw new PgQueueError(NO_PG_QUEUE_MODULE(who), { cause: error });
  }
  if (databases.length === 0) throw new PgQueueError(NO_PG_QUEUE_MODULE(who));
  return databases.map(internalsOf);
}

function internalsOf(database: QueueDatabase): QueueInternals {
  const { options, handlers, connection } = database;
  return {
    database: database.name,
    events: database.events,
    workers: database.workers,
    options,
    store: new MetricsStore(connection.pool),
    instances: new InstanceStore(connection.pool, { transactionPooler: options.transactionPooler }),
    workerQueues: () => (options.workers ? handlers.all().map((h) => h.queue) : []),
  };
}
