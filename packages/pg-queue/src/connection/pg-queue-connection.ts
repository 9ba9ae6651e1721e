import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import pg, { type ClientConfig, type Pool } from 'pg';
import { DataSource } from 'typeorm';
import type { PostgresDataSourceOptions as PostgresConnectionOptions } from 'typeorm/driver/postgres/PostgresDataSourceOptions.js';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { PgQueueModuleOptions } from '../interfaces/pg-queue-options.interface.js';
import { NO_DATA_SOURCE, NOT_POSTGRES } from '../pg-queue.messages.js';
import { PG_QUEUE_MIGRATIONS } from '../migrations/index.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import { listenerClientConfig, POOL_ROLES, queuePoolConfig, settingsOfConnectionOption, settingsOfDataSource, type ConnectionSettings, type PoolRole } from './pg-client-config.js';
import { runQueueMigrations } from './run-queue-migrations.js';
import { checkServer } from './check-server.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';
import { guardPool } from '../utils/pg-client.js';

/**
 * The database side of the module: the queue's own pg Pools, one per role (connection/pg-client-config.ts,
 * PoolRole: the API statements, the workers' lease and outcome writes and claims, maintenance), dialled with the
 * same settings as the DataSource it works with, so that handlers busy on the app's pool never delay a heartbeat
 * or an outcome, and neither do the app's own calls waiting on its locks; and the settings of the dedicated
 * LISTEN connection. Every pool opens its connections on demand: an instance without workers never dials the
 * leases pool, one without maintenance and recurring jobs never dials the maintenance pool.
 */
export class PgQueueConnection implements OnApplicationShutdown {
  private readonly logger: Logger = new PgQueueLogger('PgQueue');
  private closing: Promise<void> | undefined;

  private constructor(
    /** The pools by role. */
    readonly pools: Readonly<Record<PoolRole, Pool>>,
    readonly listenerConfig: ClientConfig,
    /** The TypeORM DataSource this module's database was taken from (`dataSource`, or the app's own when neither it nor `connection` is given; none with `connection` alone): transactional handlers run in its transactions. */
    readonly appDataSource: DataSource | undefined,
  ) {}

  /** The API pool (the statements of the app's calls; its settings are what the dashboard and the wake-up connection dial with). */
  get pool(): Pool {
    return this.pools.api;
  }

  static async open(options: PgQueueModuleOptions, resolved: ResolvedModuleOptions, appDataSource: DataSource | undefined): Promise<PgQueueConnection> {
    let settings: ConnectionSettings;
    let migrationSource: DataSource | undefined;
    if (options.connection && !options.dataSource) {
      settings = settingsOfConnectionOption(options.connection);
    } else {
      const dataSource = options.dataSource ?? appDataSource;
      if (!dataSource) throw new PgQueueError(NO_DATA_SOURCE());
      if (dataSource.options.type !== 'postgres') throw new PgQueueError(NOT_POSTGRES(dataSource.options.type));
      if (!dataSource.isInitialized) await dataSource.initialize();
      settings = settingsOfDataSource(dataSource.options as PostgresConnectionOptions);
      migrationSource = dataSource;
    }
    const listenerConfig = listenerClientConfig(settings, resolved.listenerUrl, resolved.connectTimeoutMs);
    const logger: Logger = new PgQueueLogger('PgQueue');
    const pools = Object.fromEntries(
      POOL_ROLES.map((role) => {
        const pool = guardPool(new pg.Pool(queuePoolConfig(settings, resolved, role)), (error) =>
          logger.warn(`an idle connection of the queue's ${role} pool failed: ${error.message}`),
        );
        return [role, trackConnections(pool)];
      }),
    ) as Record<PoolRole, Pool>;
    // Transactional handlers run in the DataSource the pools were dialled from, never in the app's TypeORM DataSource
    // beside a `connection` (it may be another database: completions landed there, on another database's job).
    const connection = new PgQueueConnection(pools, listenerConfig, migrationSource);
    try {
      // Before the migrations: on an engine that is not PostgreSQL they would stop half-way, with that engine's error.
      await checkServer(async (sql) => (await pools.api.query(sql)).rows, logger, resolved.migrationsRun);
      if (resolved.migrationsRun) await migrate(resolved, settings, listenerConfig, migrationSource);
    } catch (error) {
      await connection.close();
      throw error;
    }
    return connection;
  }

  async onApplicationShutdown(): Promise<void> {
    // Runs after beforeApplicationShutdown, so the workers have drained by now.
    await this.close();
  }

  /** Closes the queue's pools (never the app's DataSource). Also used when the boot fails after opening them. */
  close(): Promise<void> {
    this.closing ??= Promise.all(
      POOL_ROLES.map((role) => endPool(this.pools[role]).catch((e: unknown) => this.logger.warn(`closing the queue's ${role} connection pool failed: ${String(e)}`))),
    ).then(() => undefined);
    return this.closing;
  }
}

/** The queue's migrations at boot (`migrationsRun`), on the DataSource the pools were dialled from, or on one of their own. */
async function migrate(resolved: ResolvedModuleOptions, settings: ConnectionSettings, listenerConfig: ConnectionSettings, migrationSource: DataSource | undefined): Promise<void> {
  // Behind a transaction pooler, the migrations that run outside a transaction hold their session lock
  // on a direct connection (listenerUrl, required with transactionPooler).
  const like = migrationSource?.options as PostgresConnectionOptions | undefined;
  const openSession = resolved.transactionPooler ? () => initialized(migrationDataSource(listenerConfig, resolved.connectTimeoutMs, like)) : undefined;
  if (migrationSource) {
    await runQueueMigrations(migrationSource, PG_QUEUE_MIGRATIONS, { openSession });
    return;
  }
  // With `connection` and no DataSource, migrations run on a short-lived one-connection DataSource.
  const own = await initialized(migrationDataSource(settings, resolved.connectTimeoutMs));
  try {
    await runQueueMigrations(own, PG_QUEUE_MIGRATIONS, { openSession });
  } finally {
    await own.destroy();
  }
}

/**
 * A one-connection DataSource for the queue's migrations, dialled with `settings`; `like` gives the
 * migrations table (name and schema) of the app's DataSource, so both record in the same table.
 */
function migrationDataSource(settings: ConnectionSettings, connectTimeoutMs: number, like?: PostgresConnectionOptions): DataSource {
  const { connectionString, user, ...rest } = settings;
  return new DataSource({
    type: 'postgres',
    url: connectionString,
    username: user,
    connectTimeoutMS: connectTimeoutMs,
    extra: { ...rest, max: 1, application_name: 'nestjs-pg-queue migrations' },
    schema: like?.schema,
    migrationsTableName: like?.migrationsTableName,
    synchronize: false,
    migrationsRun: false,
  });
}

async function initialized(dataSource: DataSource): Promise<DataSource> {
  await dataSource.initialize();
  return dataSource;
}

/** How long close() waits for the pools' connections to be closed once it asked them to. */
const CONNECTIONS_CLOSED_WITHIN_MS = 5_000;

/** The connections of each queue pool that are open: connected, and not yet ended. */
const openConnections = new WeakMap<Pool, Set<unknown>>();

function trackConnections(pool: Pool): Pool {
  const open = new Set<unknown>();
  pool.on('connect', (client) => open.add(client));
  // pg emits 'remove' once a removed client's connection has ended.
  pool.on('remove', (client) => open.delete(client));
  openConnections.set(pool, open);
  return pool;
}

/**
 * Ends a pool once its connections are closed, not merely asked to close: pg's end() resolves while their
 * Terminate is still on its way, and a server stopped right after app.close() (a demo's embedded one, a test's)
 * then kills them as live sessions ("FATAL: terminating connection due to administrator command", and an idle
 * connection's error).
 */
async function endPool(pool: Pool): Promise<void> {
  await pool.end();
  const open = openConnections.get(pool);
  if (!open?.size) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, CONNECTIONS_CLOSED_WITHIN_MS).unref();
    pool.on('remove', () => {
      if (open.size > 0) return;
      clearTimeout(timer);
      resolve();
    });
  });
}
