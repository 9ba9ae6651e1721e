import type { ClientConfig, Pool, PoolConfig } from 'pg';
import { parse } from 'pg-connection-string';
import type { PostgresDataSourceOptions as PostgresConnectionOptions } from 'typeorm/driver/postgres/PostgresDataSourceOptions.js';
import type { PgQueueConnectionOptions } from '../interfaces/pg-queue-options.interface.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';

/**
 * How to reach PostgreSQL, as node-postgres takes it: the same fields TypeORM passes to its own pool, so
 * the queue's pool and LISTEN connection dial exactly as the app does (password functions, ssl, `extra`
 * such as a custom `stream` or `options`, the replication master).
 */
export type ConnectionSettings = ClientConfig & Record<string, unknown>;

/** The settings a TypeORM DataSource connects with (TypeORM spreads `extra` last, so it wins; so here). */
export function settingsOfDataSource(o: PostgresConnectionOptions): ConnectionSettings {
  const credentials = o.replication?.master ?? o;
  return withoutUndefined({
    connectionString: credentials.url,
    host: credentials.host,
    port: credentials.port,
    user: credentials.username,
    password: credentials.password,
    database: credentials.database,
    ssl: credentials.ssl as ClientConfig['ssl'],
    ...(o.extra as Record<string, unknown> | undefined),
  });
}

/** A pg Pool's own fields, which say how it manages connections rather than how to reach PostgreSQL. */
const POOL_ONLY_FIELDS = ['max', 'min', 'idleTimeoutMillis', 'maxUses', 'maxLifetimeSeconds', 'allowExitOnIdle', 'log', 'Promise', 'Client', 'verify', 'onConnect'];

/**
 * The settings of the module's own `connection` option. Given the app's pg Pool (the one Kysely's PostgresDialect
 * or Drizzle's node-postgres driver was built on), the queue dials as that pool does, on a pool of its own: the
 * app's pool is never used, so the queue's statements never wait behind the app's.
 */
export function settingsOfConnectionOption(connection: PgQueueConnectionOptions): ConnectionSettings {
  if (isPgPool(connection)) {
    const settings: Record<string, unknown> = { ...connection.options };
    for (const field of POOL_ONLY_FIELDS) delete settings[field];
    return withoutUndefined(settings as ConnectionSettings);
  }
  const c = typeof connection === 'string' ? { url: connection } : connection;
  return withoutUndefined({
    connectionString: c.url,
    host: c.host,
    port: c.port,
    user: c.username,
    password: c.password,
    database: c.database,
    ssl: c.ssl as ClientConfig['ssl'],
    ...c.extra,
  });
}

/**
 * The queue's pools, one per role, so that no role waits for a connection behind another's statements (issue 39
 * item 5: enqueues waiting on an app transaction's unique key filled the one pool, the heartbeat could not run,
 * the lease lapsed and another instance ran the job again):
 * - `api`: the statements of the app's calls (enqueue without a manager, waitFor, get, cancel, retry, pause,
 *   stats, schedules, flows, metrics and health reads) and what handlers ask through their Job (steps, flow reads);
 *   these may wait on locks the app's transactions hold;
 * - `leases`: heartbeats (renewals, start marks), outcome writes, put-backs, claims, the instance registration:
 *   none waits on a lock an app transaction can hold (claims skip locked rows);
 * - `maintenance`: sweeper, pruner, history mover, the recurring tick.
 * The LISTEN connections and the wake-up connection are single clients of their own.
 */
export type PoolRole = 'api' | 'leases' | 'maintenance';

export const POOL_ROLES: readonly PoolRole[] = ['api', 'leases', 'maintenance'];

/** The option that sizes each pool (named in POOL_EXHAUSTED). */
export const POOL_SIZE_OPTION: Record<PoolRole, 'poolSize' | 'leasePoolSize' | 'maintenancePoolSize'> = {
  api: 'poolSize',
  leases: 'leasePoolSize',
  maintenance: 'maintenancePoolSize',
};

/** `application_name` of a pool's connections: pg_stat_activity tells the roles apart. */
export const poolApplicationName = (role: PoolRole) => `nestjs-pg-queue ${role}`;

/** One of the queue's pools: small, bounded waits, and statements that cannot run forever. */
export function queuePoolConfig(settings: ConnectionSettings, options: ResolvedModuleOptions, role: PoolRole = 'api'): PoolConfig {
  const config: PoolConfig = {
    keepAlive: true,
    ...settings,
    application_name: poolApplicationName(role),
    max: options[POOL_SIZE_OPTION[role]],
    connectionTimeoutMillis: options.connectTimeoutMs,
  };
  delete config.statement_timeout;
  delete config.idle_in_transaction_session_timeout;
  delete config.query_timeout;
  if (options.statementTimeoutMs > 0) {
    // PgBouncer refuses unknown startup parameters, so behind a transaction pooler only the client-side
    // timeout applies (set statement_timeout on the role there); it also ends a query lost to a dead network.
    if (!options.transactionPooler) {
      config.statement_timeout = options.statementTimeoutMs;
      config.idle_in_transaction_session_timeout = options.statementTimeoutMs;
    }
    config.query_timeout = options.statementTimeoutMs + 2_000;
  }
  return config;
}

/**
 * The dedicated LISTEN connection (also the direct session that non-transactional migrations run on behind
 * a transaction pooler): the same settings, or `listenerUrl` (a direct PostgreSQL URL) over them. Only the
 * fields the URL holds replace the base ones: node-postgres would let a URL without a password overwrite the
 * DataSource's password function with ''. Pool-only fields are ignored by pg.Client.
 */
export function listenerClientConfig(settings: ConnectionSettings, listenerUrl: string | undefined, connectTimeoutMs?: number): ConnectionSettings {
  const base: ConnectionSettings = { keepAlive: true, ...settings };
  if (listenerUrl !== undefined) {
    // The base URL's fields first (as node-postgres would read them), then the listener URL's over them.
    if (typeof base.connectionString === 'string') Object.assign(base, fieldsOfUrl(base.connectionString));
    delete base.connectionString;
    Object.assign(base, fieldsOfUrl(listenerUrl));
  }
  delete base.statement_timeout;
  delete base.query_timeout;
  delete base.idle_in_transaction_session_timeout;
  if (connectTimeoutMs !== undefined) base.connectionTimeoutMillis = connectTimeoutMs;
  return { ...base, application_name: 'nestjs-pg-queue listener' };
}

/** The connection fields a postgres:// URL actually holds (an absent password or port is left out). */
function fieldsOfUrl(url: string): ConnectionSettings {
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(parse(url))) {
    if (value === undefined || value === null || value === '') continue;
    fields[key] = key === 'port' ? Number(value) : value;
  }
  return fields as ConnectionSettings;
}

function withoutUndefined<T extends Record<string, unknown>>(o: T): T {
  for (const key of Object.keys(o)) if (o[key] === undefined) delete o[key];
  return o;
}

function isPgPool(connection: PgQueueConnectionOptions): connection is Pool {
  const pool = connection as Partial<Pool>;
  return typeof pool === 'object' && typeof pool.connect === 'function' && typeof pool.options === 'object';
}
