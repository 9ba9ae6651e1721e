import { Module, type DynamicModule, type Provider } from '@nestjs/common';
import pg from 'pg';
import type { PgQueueConnection } from '../connection/pg-queue-connection.js';
import { getQueueConnectionToken, getQueueServiceToken } from '../databases/database-tokens.js';
import { DEFAULT_DATABASE } from '../pg-queue.constants.js';
import { QueueService } from '../queue.service.js';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { DashboardStore } from '../store/dashboard.store.js';
import { createDashboardController } from './dashboard.controller.js';
import { DASHBOARD_OPTIONS } from './dashboard.constants.js';
import { DASHBOARD_BAD_OPTION, DASHBOARD_UNKNOWN_DATABASE } from './dashboard.messages.js';
import type { PgQueueDashboardAsyncOptions, PgQueueDashboardOptions } from './dashboard-options.interface.js';
import { DashboardService } from './dashboard.service.js';
import { dashboardDatabase, normalizeDashboardPath, resolveDashboardOptions, type ResolvedDashboardOptions } from './resolve-dashboard-options.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';
import { guardPool } from '../utils/pg-client.js';

/** Connections of the dashboard's own pool: pages never take one the workers need. */
const DASHBOARD_POOL_SIZE = 2;
const logger = new PgQueueLogger('PgQueueDashboard');

/**
 * The embedded dashboard, mounted at `path` of the app's HTTP server (Express or Fastify). Needs
 * PgQueueModule in the app (it reads the queue's connection settings from it). Refuses to boot without an
 * authorisation hook unless `public: true`.
 */
@Module({})
export class PgQueueDashboardModule {
  static forRoot(options: PgQueueDashboardOptions): DynamicModule {
    if (options === null || typeof options !== 'object') throw new PgQueueError(DASHBOARD_BAD_OPTION('options', options, 'an object with path and auth'));
    // Checked here already, so that a missing auth hook fails where the module is declared.
    const { path } = resolveDashboardOptions(options);
    const guard = typeof options.auth === 'object' && options.auth !== null ? options.auth.guard : undefined;
    return build(path, guard, { provide: DASHBOARD_OPTIONS, useFactory: () => resolveDashboardOptions(options) }, [], dashboardDatabase(options.database));
  }

  static forRootAsync(options: PgQueueDashboardAsyncOptions): DynamicModule {
    if (options === null || typeof options !== 'object' || typeof options.useFactory !== 'function') {
      throw new PgQueueError(DASHBOARD_BAD_OPTION('forRootAsync options', options, 'an object with path and useFactory'));
    }
    const path = normalizeDashboardPath(options.path);
    const database = dashboardDatabase(options.database);
    return build(
      path,
      options.guard,
      {
        provide: DASHBOARD_OPTIONS,
        useFactory: async (...args: never[]) => resolveDashboardOptions({ ...(await options.useFactory(...args)), path, database }, options.guard !== undefined),
        inject: options.inject ?? [],
      },
      options.imports ?? [],
      database,
    );
  }
}

function build(path: string, guard: PgQueueDashboardAsyncOptions['guard'], optionsProvider: Provider, imports: DynamicModule['imports'], database: string): DynamicModule {
  return {
    module: PgQueueDashboardModule,
    imports,
    controllers: [createDashboardController(path, guard)],
    providers: [
      optionsProvider,
      // A named database's QueueService under the class token within this module (DashboardService injects it; the
      // default one is the global export); a name no PgQueueModule has fails the boot with the option's name.
      ...(database === DEFAULT_DATABASE
        ? []
        : [{ provide: QueueService, useFactory: (service?: QueueService) => service ?? unknownDatabase(database), inject: [{ token: getQueueServiceToken(database), optional: true }] }]),
      {
        provide: DashboardStore,
        // The queue pool's connection settings (whatever the app passed to PgQueueModule), in a pool of its own.
        useFactory: (connection: PgQueueConnection | undefined, resolved: ResolvedDashboardOptions) => {
          if (!connection) return unknownDatabase(database);
          // A connection that dies (a server restart) must not become an unhandled 'error' that ends the app.
          const pool = guardPool(new pg.Pool({ ...connection.pool.options, max: DASHBOARD_POOL_SIZE, application_name: 'nestjs-pg-queue dashboard' }), (error) =>
            logger.warn(`an idle connection of the dashboard's pool failed: ${error.message}`),
          );
          return new DashboardStore(pool, resolved.statementTimeoutMs);
        },
        inject: [{ token: getQueueConnectionToken(database), optional: true }, DASHBOARD_OPTIONS],
      },
      DashboardService,
    ],
  };
}

function unknownDatabase(database: string): never {
  throw new PgQueueError(DASHBOARD_UNKNOWN_DATABASE(database));
}
