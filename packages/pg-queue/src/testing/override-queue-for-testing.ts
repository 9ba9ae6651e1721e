import type { INestApplicationContext } from '@nestjs/common';
import { PgQueueConnection } from '../connection/pg-queue-connection.js';
import { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import { RESOLVED_OPTIONS } from '../pg-queue.constants.js';
import { JobWaiters } from '../waiting/job-waiters.js';
import { RecurringScheduler } from '../recurring/recurring-scheduler.js';
import { JobStore } from '../store/job.store.js';
import { ScheduleStore } from '../store/schedule.store.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import { WorkerPool } from '../worker/worker-pool.js';
import { JobEvents } from '../events/job-events.js';
import { InlineQueueService } from './inline-queue.service.js';
import type { QueueTestKit } from './queue-test-kit.js';
import { BAD_TESTING_MODE, NOT_A_TESTING_APP } from './testing.messages.js';
import { TestingWorkerPool } from './testing-worker-pool.js';
import { TestingRecurringScheduler } from './testing-recurring-scheduler.js';
import { RecurringJobRegistry } from '../recurring/recurring-job.registry.js';
import type { QueueDatabase } from '../databases/queue-database.js';
import { QueueDatabases } from '../databases/queue-databases.js';
import { DATABASE_NAME, DATABASE_QUEUE_SERVICE, DEFAULT_DATABASE } from '../pg-queue.constants.js';
import { AmbientTransactions } from '../transactions/ambient-transactions.js';

export interface QueueTestingOptions {
  /**
   * 'manual' (recommended): jobs are stored and wait; `drain()` runs them. 'inline': each enqueue also runs
   * the due jobs of its queue before it returns (an enqueue inside an open transaction: at the next drain).
   */
  mode: 'manual' | 'inline';
}

type Token = unknown;
/** The part of Nest's TestingModuleBuilder this needs (structural: the kit does not depend on @nestjs/testing). */
export interface OverridableModuleBuilder {
  overrideProvider(token: Token): { useFactory(options: { factory: (...args: never[]) => unknown; inject?: Token[] }): OverridableModuleBuilder };
}

/**
 * Makes the app's PgQueueModule testable, on its real schema: no worker loops (a test runs jobs with the
 * kit), no recurring fires on the wall clock (a test fires a schedule with the kit), everything else (enqueue, transactions, migrations, options, handlers) as the app configured it.
 *
 *   const moduleRef = await overrideQueueForTesting(Test.createTestingModule({ imports: [AppModule] }), { mode: 'manual' }).compile();
 *   const app = await moduleRef.createNestApplication().init();
 *   const queue = getQueueTestKit(app);
 */
export function overrideQueueForTesting<B extends OverridableModuleBuilder>(builder: B, options: QueueTestingOptions): B {
  const mode = options?.mode;
  if (mode !== 'manual' && mode !== 'inline') throw new Error(BAD_TESTING_MODE(mode));
  let result = builder
    .overrideProvider(RecurringScheduler)
    .useFactory({
      factory: (schedules: ScheduleStore, jobs: JobStore, declared: RecurringJobRegistry, registry: JobHandlerRegistry, resolved: ResolvedModuleOptions) =>
        new TestingRecurringScheduler(schedules, jobs, declared, registry, resolved),
      inject: [ScheduleStore, JobStore, RecurringJobRegistry, JobHandlerRegistry, RESOLVED_OPTIONS],
    })
    .overrideProvider(WorkerPool)
    .useFactory({
      factory: (
        registry: JobHandlerRegistry,
        store: JobStore,
        connection: PgQueueConnection,
        events: JobEvents,
        resolved: ResolvedModuleOptions,
        scheduler: RecurringScheduler,
      ) => new TestingWorkerPool(registry, store, connection, events, resolved, mode, scheduler),
      inject: [JobHandlerRegistry, JobStore, PgQueueConnection, JobEvents, RESOLVED_OPTIONS, RecurringScheduler],
    });
  if (mode === 'inline') {
    // Every database's service (one token in every PgQueueModule instance, whatever its public one): an enqueue through
    // any of them runs its jobs, each with the kit of its queue's database.
    result = result.overrideProvider(DATABASE_QUEUE_SERVICE).useFactory({
      factory: (
        store: JobStore,
        registry: JobHandlerRegistry,
        resolved: ResolvedModuleOptions,
        scheduleStore: ScheduleStore,
        scheduler: RecurringScheduler,
        pool: WorkerPool,
        waiters: JobWaiters,
        databases: QueueDatabases<QueueDatabase>,
        databaseName: string,
        ambient: AmbientTransactions | undefined,
      ) => {
        // No wake sender (no worker loops to wake) and no workers to tell of a pause; the surrounding @Transactional()
        // call's transaction (option ambientTransactions) is joined as in production, and its jobs run at its commit.
        const service = new InlineQueueService(store, registry, resolved, scheduleStore, scheduler, waiters, undefined, undefined, ambient, databases, databaseName);
        service.kit = (pool as TestingWorkerPool).kit;
        return service;
      },
      inject: [
        JobStore,
        JobHandlerRegistry,
        RESOLVED_OPTIONS,
        ScheduleStore,
        RecurringScheduler,
        WorkerPool,
        JobWaiters,
        QueueDatabases,
        DATABASE_NAME,
        { token: AmbientTransactions, optional: true },
      ],
    });
  }
  return result as B;
}

/** The kit of an app (or testing module) built with overrideQueueForTesting. */
export function getQueueTestKit(app: Pick<INestApplicationContext, 'get'>, database: string = DEFAULT_DATABASE): QueueTestKit {
  let pool: unknown;
  try {
    // The kit of the named database's PgQueueModule (several databases), else the app's one.
    pool = app.get<QueueDatabases, QueueDatabases<QueueDatabase>>(QueueDatabases, { strict: false }).get(database).workers;
  } catch (error) {
    if (database !== DEFAULT_DATABASE) throw error;
    pool = undefined;
  }
  if (!(pool instanceof TestingWorkerPool)) throw new Error(NOT_A_TESTING_APP());
  return pool.kit;
}
