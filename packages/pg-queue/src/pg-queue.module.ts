import { Module, type DynamicModule, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import type { DataSource } from 'typeorm';
import { PgQueueConnection } from './connection/pg-queue-connection.js';
import { POOL_SIZE_OPTION, type PoolRole } from './connection/pg-client-config.js';
import { JobHandlerExplorer } from './discovery/job-handler.explorer.js';
import { JobHandlerRegistry } from './discovery/job-handler.registry.js';
import { JobEvents } from './events/job-events.js';
import type { PgQueueModuleOptions } from './interfaces/pg-queue-options.interface.js';
import { MaintenanceScheduler } from './maintenance/maintenance.scheduler.js';
import { DeclaredEventQueues } from './events/declared-event-queues.js';
import { DATABASE_NAME, DATABASE_QUEUE_SERVICE, DEFAULT_DATABASE, LEASE_JOB_STORE, MAINTENANCE_JOB_STORE, MAINTENANCE_SCHEDULE_STORE, TYPEORM_DATA_SOURCE } from './pg-queue.constants.js';
import { getJobEventsToken, getQueueConnectionToken, getQueueServiceToken } from './databases/database-tokens.js';
import type { QueueDatabase } from './databases/queue-database.js';
import { QueueDatabases } from './databases/queue-databases.js';
import { ASYNC_OPTIONS_TYPE, ConfigurableModuleClass, MODULE_OPTIONS_TOKEN, OPTIONS_TYPE } from './pg-queue.module-definition.js';
import { RESOLVED_OPTIONS } from './pg-queue.constants.js';
import { QueueService } from './queue.service.js';
import { AmbientTransactions } from './transactions/ambient-transactions.js';
import { RecurringJobRegistry } from './recurring/recurring-job.registry.js';
import { RecurringScheduler } from './recurring/recurring-scheduler.js';
import { JobStore } from './store/job.store.js';
import { ScheduleStore } from './store/schedule.store.js';
import { loadOtelApi, OTEL_API } from './tracing/otel-api.js';
import { resolveModuleOptions, type ResolvedModuleOptions } from './utils/resolve-options.js';
import { JobWaiters } from './waiting/job-waiters.js';
import { WakeConnection } from './waking/wake-connection.js';
import { WakeSender } from './waking/wake-sender.js';
import { WorkerPool } from './worker/worker-pool.js';
import { PgQueueLogger } from './utils/pg-queue-logger.js';

/**
 * Wiring only. `PgQueueModule.forRoot(options)` or `.forRootAsync({ imports, inject, useFactory })`;
 * `dataSourceName` and `isGlobal` sit next to them. No ScheduleModule.forRoot() here: a second one would
 * run the app's own @Cron / @Interval methods twice (MaintenanceScheduler uses the app's SchedulerRegistry,
 * or one of its own).
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    { provide: RESOLVED_OPTIONS, useFactory: resolveModuleOptions, inject: [MODULE_OPTIONS_TOKEN] },
    {
      provide: PgQueueConnection,
      useFactory: (options: PgQueueModuleOptions, resolved: ResolvedModuleOptions, appDataSource?: DataSource) =>
        PgQueueConnection.open(options, resolved, appDataSource),
      inject: [MODULE_OPTIONS_TOKEN, RESOLVED_OPTIONS, TYPEORM_DATA_SOURCE],
    },
    // One store per pool (PoolRole): the class tokens are the API pool's (QueueService, waitFor, the dashboard's
    // actions, the testing kit); the workers and maintenance take theirs by token, so that their statements never
    // wait for a connection behind the app's calls.
    {
      provide: JobStore,
      useFactory: (connection: PgQueueConnection, resolved: ResolvedModuleOptions) => jobStoreOn(connection, resolved, 'api'),
      inject: [PgQueueConnection, RESOLVED_OPTIONS],
    },
    {
      provide: LEASE_JOB_STORE,
      useFactory: (connection: PgQueueConnection, resolved: ResolvedModuleOptions) => jobStoreOn(connection, resolved, 'leases'),
      inject: [PgQueueConnection, RESOLVED_OPTIONS],
    },
    {
      provide: MAINTENANCE_JOB_STORE,
      useFactory: (connection: PgQueueConnection, resolved: ResolvedModuleOptions) => jobStoreOn(connection, resolved, 'maintenance'),
      inject: [PgQueueConnection, RESOLVED_OPTIONS],
    },
    {
      provide: ScheduleStore,
      useFactory: (connection: PgQueueConnection, resolved: ResolvedModuleOptions) =>
        new ScheduleStore(connection.pools.api, { transactionPooler: resolved.transactionPooler }),
      inject: [PgQueueConnection, RESOLVED_OPTIONS],
    },
    {
      provide: MAINTENANCE_SCHEDULE_STORE,
      useFactory: (connection: PgQueueConnection, resolved: ResolvedModuleOptions) =>
        new ScheduleStore(connection.pools.maintenance, { transactionPooler: resolved.transactionPooler }),
      inject: [PgQueueConnection, RESOLVED_OPTIONS],
    },
    // Dialled as the queue's API pool dials (pg-pool hands its options to each pg.Client it makes); while it is down,
    // wake-ups go out on the API pool (they follow the app's enqueues).
    {
      provide: WakeSender,
      useFactory: (connection: PgQueueConnection, store: JobStore) => {
        const logger = new PgQueueLogger('PgQueue');
        return new WakeSender(new WakeConnection(connection.pool.options, store, logger), logger);
      },
      inject: [PgQueueConnection, JobStore],
    },
    // Tracing: the boot waits for the lazy import of @opentelemetry/api (undefined when the app lacks it).
    { provide: OTEL_API, useFactory: () => loadOtelApi() },
    JobHandlerRegistry,
    JobEvents,
    RecurringJobRegistry,
    JobHandlerExplorer,
    RecurringScheduler,
    WorkerPool,
    MaintenanceScheduler,
    JobWaiters,
    AmbientTransactions,
    DeclaredEventQueues,
  ],
})
export class PgQueueModule extends ConfigurableModuleClass {
  static forRoot(options: typeof OPTIONS_TYPE): DynamicModule {
    return forDatabase(super.forRoot(options), options.name);
  }

  static forRootAsync(options: typeof ASYNC_OPTIONS_TYPE): DynamicModule {
    return forDatabase(super.forRootAsync(options), options.name);
  }
}

/**
 * What an instance exports: the default database's services by class (QueueService, JobEvents, and PgQueueConnection,
 * whose settings the dashboard dials with), a named database's by its name only (`@InjectQueueService('reports')`):
 * two exports of the QueueService class would leave which one an app gets to Nest's resolution order.
 */
function forDatabase(module: DynamicModule, name: string | undefined): DynamicModule {
  const serviceToken = getQueueServiceToken(name);
  const providers: Provider[] = [
    { provide: DATABASE_QUEUE_SERVICE, useClass: QueueService },
    // Its public token: the class for the default database; for a named one a string only (no class token at all, so
    // that `app.get(QueueService)` finds the default one).
    { provide: serviceToken, useExisting: DATABASE_QUEUE_SERVICE },
    // This instance in the app's list of databases, before any onModuleInit (discovery asks it who owns a queue).
    {
      provide: QueueDatabases.REGISTRATION,
      useFactory: (
        databases: QueueDatabases<QueueDatabase>,
        database: string,
        service: QueueService,
        connection: PgQueueConnection,
        events: JobEvents,
        options: ResolvedModuleOptions,
        workers: WorkerPool,
        handlers: JobHandlerRegistry,
      ) => databases.add({ name: database, listed: new Set(database === DEFAULT_DATABASE ? [] : Object.keys(options.queues)), service, connection, events, options, workers, handlers }),
      inject: [QueueDatabases, DATABASE_NAME, serviceToken, PgQueueConnection, JobEvents, RESOLVED_OPTIONS, WorkerPool, JobHandlerRegistry],
    },
  ];
  if (serviceToken === QueueService) return { ...module, providers: [...(module.providers ?? []), ...providers], exports: [...(module.exports ?? []), QueueService, JobEvents, PgQueueConnection] };
  const named: Provider[] = [
    { provide: getJobEventsToken(name), useExisting: JobEvents },
    { provide: getQueueConnectionToken(name), useExisting: PgQueueConnection },
  ];
  return {
    ...module,
    providers: [...(module.providers ?? []), ...providers, ...named],
    exports: [...(module.exports ?? []), serviceToken, ...named.map((p) => (p as { provide: string }).provide)],
  };
}

/** A JobStore on one of the instance's pools; a full pool's error names the option that sizes it. */
function jobStoreOn(connection: PgQueueConnection, resolved: ResolvedModuleOptions, role: PoolRole): JobStore {
  const poolSizeOption = POOL_SIZE_OPTION[role];
  return new JobStore(connection.pools[role], { transactionPooler: resolved.transactionPooler, poolSize: resolved[poolSizeOption], poolSizeOption, connectTimeoutMs: resolved.connectTimeoutMs });
}
