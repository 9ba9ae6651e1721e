import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { ClientConfig, Pool } from 'pg';
import { DataSource, type DataSourceOptions } from 'typeorm';
import type { PostgresDataSourceOptions as PostgresConnectionOptions } from 'typeorm/driver/postgres/PostgresDataSourceOptions.js';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver.js';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { PgQueueConnectionOptions, PgQueueModuleOptions } from '../interfaces/pg-queue-options.interface.js';
import { NO_DATA_SOURCE, NOT_POSTGRES } from '../pg-queue.messages.js';
import { BackgroundJobEntity } from '../store/background-job.entity.js';
import { PG_QUEUE_MIGRATIONS } from '../migrations/index.js';
import { runQueueMigrations } from './run-queue-migrations.js';

/**
 * The database side of the module: which DataSource it uses (the app's, a given one, or its own), the
 * pg Pool under it for the hot path, and the settings for the dedicated LISTEN connection.
 */
export class PgQueueConnection implements OnApplicationShutdown {
  private readonly logger = new Logger('PgQueue');

  private constructor(
    readonly dataSource: DataSource,
    private readonly ownsDataSource: boolean,
    readonly listenerConfig: ClientConfig,
  ) {}

  get pool(): Pool {
    return (this.dataSource.driver as PostgresDriver).master as Pool;
  }

  static async open(options: PgQueueModuleOptions, appDataSource: DataSource | undefined, migrationsRun: boolean): Promise<PgQueueConnection> {
    let dataSource: DataSource;
    let owns = false;
    if (options.dataSource) {
      dataSource = options.dataSource;
    } else if (options.connection) {
      dataSource = new DataSource(ownDataSourceOptions(options.connection));
      owns = true;
    } else if (appDataSource) {
      dataSource = appDataSource;
    } else {
      throw new PgQueueError(NO_DATA_SOURCE());
    }
    if (dataSource.options.type !== 'postgres') throw new PgQueueError(NOT_POSTGRES(dataSource.options.type));
    if (!dataSource.isInitialized) await dataSource.initialize();
    try {
      if (migrationsRun) await runQueueMigrations(dataSource);
    } catch (error) {
      if (owns) await dataSource.destroy();
      throw error;
    }
    const listenerConfig: ClientConfig = options.listenerUrl
      ? { connectionString: options.listenerUrl }
      : listenerConfigOf(dataSource.options as PostgresConnectionOptions);
    return new PgQueueConnection(dataSource, owns, listenerConfig);
  }

  async onApplicationShutdown(): Promise<void> {
    // Runs after beforeApplicationShutdown, so the workers have drained by now.
    await this.close();
  }

  /** Closes the module's own DataSource (never the app's). Also used when the boot fails after opening it. */
  async close(): Promise<void> {
    if (this.ownsDataSource && this.dataSource.isInitialized) {
      await this.dataSource.destroy().catch((e: unknown) => this.logger.warn(`closing the queue's connection pool failed: ${String(e)}`));
    }
  }
}

function ownDataSourceOptions(connection: PgQueueConnectionOptions): DataSourceOptions {
  const c = typeof connection === 'string' ? { url: connection } : connection;
  return {
    type: 'postgres',
    url: c.url,
    host: c.host,
    port: c.port,
    username: c.username,
    password: c.password,
    database: c.database,
    ssl: c.ssl as PostgresConnectionOptions['ssl'],
    poolSize: c.poolSize ?? 10,
    entities: [BackgroundJobEntity],
    migrations: PG_QUEUE_MIGRATIONS,
    migrationsRun: false, // run under the advisory lock instead
    synchronize: false,
    applicationName: 'nestjs-pg-queue',
  };
}

/** The LISTEN connection dials PostgreSQL with the DataSource's own settings unless told otherwise. */
function listenerConfigOf(o: PostgresConnectionOptions): ClientConfig {
  return {
    connectionString: o.url,
    host: o.host,
    port: o.port,
    user: o.username,
    password: typeof o.password === 'function' ? undefined : o.password,
    database: o.database,
    ssl: o.ssl as ClientConfig['ssl'],
    application_name: 'nestjs-pg-queue listener',
    keepAlive: true,
  };
}
