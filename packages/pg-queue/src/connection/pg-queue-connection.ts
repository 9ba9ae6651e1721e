import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import pg, { type ClientConfig, type Pool } from 'pg';
import { DataSource } from 'typeorm';
import type { PostgresDataSourceOptions as PostgresConnectionOptions } from 'typeorm/driver/postgres/PostgresDataSourceOptions.js';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { PgQueueModuleOptions } from '../interfaces/pg-queue-options.interface.js';
import { LISTEN_THROUGH_POOLER, NO_DATA_SOURCE, NOT_POSTGRES } from '../pg-queue.messages.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import { listenerClientConfig, queuePoolConfig, settingsOfConnectionOption, settingsOfDataSource, type ConnectionSettings } from './pg-client-config.js';
import { runQueueMigrations } from './run-queue-migrations.js';

/**
 * The database side of the module: the queue's own small pg Pool (every statement of the queue except an
 * enqueue in the caller's transaction), dialled with the same settings as the DataSource it works with,
 * so that handlers busy on the app's pool never delay a heartbeat or an outcome; and the settings of the
 * dedicated LISTEN connection.
 */
export class PgQueueConnection implements OnApplicationShutdown {
  private readonly logger = new Logger('PgQueue');
  private closing: Promise<void> | undefined;

  private constructor(
    readonly pool: Pool,
    readonly listenerConfig: ClientConfig,
  ) {}

  static async open(options: PgQueueModuleOptions, resolved: ResolvedModuleOptions, appDataSource: DataSource | undefined): Promise<PgQueueConnection> {
    let settings: ConnectionSettings;
    if (options.connection && !options.dataSource) {
      settings = settingsOfConnectionOption(options.connection);
      if (resolved.migrationsRun) await migrateWithOwnDataSource(settings);
    } else {
      const dataSource = options.dataSource ?? appDataSource;
      if (!dataSource) throw new PgQueueError(NO_DATA_SOURCE());
      if (dataSource.options.type !== 'postgres') throw new PgQueueError(NOT_POSTGRES(dataSource.options.type));
      if (!dataSource.isInitialized) await dataSource.initialize();
      settings = settingsOfDataSource(dataSource.options as PostgresConnectionOptions);
      if (resolved.migrationsRun) await runQueueMigrations(dataSource);
    }
    const logger = new Logger('PgQueue');
    if (resolved.transactionPooler && resolved.listenerUrl === undefined && resolved.workers) logger.warn(LISTEN_THROUGH_POOLER());
    const pool = new pg.Pool(queuePoolConfig(settings, resolved));
    // An idle client that loses its server emits here; without a listener that would crash the host.
    pool.on('error', (error) => logger.warn(`an idle connection of the queue's pool failed: ${error.message}`));
    return new PgQueueConnection(pool, listenerClientConfig(settings, resolved.listenerUrl));
  }

  async onApplicationShutdown(): Promise<void> {
    // Runs after beforeApplicationShutdown, so the workers have drained by now.
    await this.close();
  }

  /** Closes the queue's pool (never the app's DataSource). Also used when the boot fails after opening it. */
  close(): Promise<void> {
    this.closing ??= this.pool.end().catch((e: unknown) => this.logger.warn(`closing the queue's connection pool failed: ${String(e)}`));
    return this.closing;
  }
}

/** With `connection` and no DataSource, migrations run on a short-lived one-connection DataSource. */
async function migrateWithOwnDataSource(settings: ConnectionSettings): Promise<void> {
  const { connectionString, user, ...rest } = settings;
  const dataSource = new DataSource({
    type: 'postgres',
    url: connectionString,
    username: user,
    extra: { ...rest, max: 1 },
    applicationName: 'nestjs-pg-queue migrations',
    synchronize: false,
    migrationsRun: false,
  });
  await dataSource.initialize();
  try {
    await runQueueMigrations(dataSource);
  } finally {
    await dataSource.destroy();
  }
}
