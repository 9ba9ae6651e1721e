import type { PgQueueConnection } from '../connection/pg-queue-connection.js';
import type { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import type { JobEvents } from '../events/job-events.js';
import type { RecurringScheduler } from '../recurring/recurring-scheduler.js';
import type { JobStore } from '../store/job.store.js';
import { TestKitStore } from '../store/test-kit.store.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import { WorkerPool } from '../worker/worker-pool.js';
import { QueueTestKit } from './queue-test-kit.js';

/**
 * Stands in for the WorkerPool in a test: no claim loops, no LISTEN connection, no heartbeat, no timers, so
 * nothing runs unless the test says so (drain, or an inline enqueue) and nothing is left open after
 * app.close(). The kit it holds runs jobs with the same store and handlers the real pool would use.
 */
export class TestingWorkerPool extends WorkerPool {
  readonly kit: QueueTestKit;

  constructor(
    registry: JobHandlerRegistry,
    store: JobStore,
    connection: PgQueueConnection,
    events: JobEvents,
    options: ResolvedModuleOptions,
    mode: 'manual' | 'inline',
    scheduler: RecurringScheduler,
  ) {
    super(registry, store, connection, events, options);
    this.kit = new QueueTestKit(registry, store, new TestKitStore(connection.pool), options, mode, scheduler, connection.appDataSource);
  }

  override async onApplicationBootstrap(): Promise<void> {}

  /** An inline run the app did not await may still be going: let it settle before the pool closes. */
  override async beforeApplicationShutdown(): Promise<void> {
    await this.kit.settled();
  }
}
