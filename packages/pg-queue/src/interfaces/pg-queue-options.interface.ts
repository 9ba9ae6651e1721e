import type { Pool } from 'pg';
import type { DataSource } from 'typeorm';
import type { JobHandlerOptions } from './job-handler-options.interface.js';

/**
 * A connection of the module's own: a URL, node-postgres style fields, or the app's pg Pool (as Kysely and Drizzle
 * are built on), whose settings it dials with on a pool of its own.
 */
export type PgQueueConnectionOptions =
  | string
  | Pool
  | {
      url?: string;
      host?: string;
      port?: number;
      username?: string;
      /** A string, or a function returning one (IAM auth tokens, rotated secrets), asked on every new connection. */
      password?: string | (() => string | Promise<string>);
      database?: string;
      ssl?: boolean | Record<string, unknown>;
      /** Extra node-postgres client settings (as TypeORM's `extra`); `max` is ignored: see `poolSize`, `leasePoolSize` and `maintenancePoolSize`. */
      extra?: Record<string, unknown>;
      /** Same as the module option `poolSize` (kept for existing configs). */
      poolSize?: number;
    };

export interface PgQueueMaintenanceOptions {
  /** Run the sweeper and pruner in this instance (each pass runs on one instance at a time). Default true. */
  enabled?: boolean;
  /** How often the sweeper looks for expired leases. Default 5_000. */
  sweepIntervalMs?: number;
  /** How often the pruner deletes finished jobs past retention. Default 60_000. */
  pruneIntervalMs?: number;
  /** Completed jobs are kept this long after they finish. 0 deletes them at completion. Default 1 day. */
  completedRetentionMs?: number;
  /** Failed (dead-lettered) and cancelled jobs are kept this long; null keeps them forever. Default 7 days. */
  failedRetentionMs?: number | null;
  /** Recorded events (README: "Event stream") are kept this long after they were written. Default 7 days. */
  eventRetentionMs?: number;
  /**
   * Rows deleted per pruning statement, to keep each transaction short. At most 50_000, so that one batch
   * (a few seconds on a busy table) stays well under statementTimeoutMs; lower it with a small timeout. Default 5_000.
   */
  pruneBatchSize?: number;
  /**
   * Partitioned history (README: "Long retention: partitioned history"): finished jobs leave background_jobs for
   * background_jobs_history, partitioned by kind (completed; failed and cancelled) and finish time, and retention
   * drops whole partitions instead of deleting rows. `true` takes the defaults. Off by default. Reads (get, waitFor,
   * the dashboard, the CLI, stats, metrics, the testing kit) see both tables either way.
   */
  history?: boolean | PgQueueHistoryOptions;
}

export interface PgQueueHistoryOptions {
  /**
   * The finish time one partition covers, by UTC: 'hour', 'day', 'week' or 'month'. A partition is dropped once
   * its newest possible row is past retention, so a job is kept up to its retention plus one width. At most the
   * shorter retention (a width longer than it would keep jobs a width too long). Default 'day'.
   */
  partitionWidth?: 'hour' | 'day' | 'week' | 'month';
  /** A finished job moves once it finished this long ago. Default 0: at the mover's next pass. */
  moveAfterMs?: number;
  /** How often the mover runs; each pass moves batches until none is left, up to 100 batches. Default 1_000. */
  moveIntervalMs?: number;
  /** Rows moved per statement (each a short transaction that locks only the rows it moves). Default 5_000. */
  moveBatchSize?: number;
}

/** What readiness (PgQueueHealthIndicator.isReady), the metrics and the instance's row call progress (README: Health). */
export interface PgQueueHealthOptions {
  /**
   * A queue this process serves is stalled when it has due jobs and idle slots and none of its claims has answered for
   * this long (a claim wedged behind a lock, a claim loop that no longer wakes). Must be longer than pollIntervalMs: an
   * idle loop claims at least once per poll. Default the larger of 60_000 and 2 x pollIntervalMs.
   */
  claimStalledAfterMs?: number;
  /**
   * Readiness fails while the event loop lags more than this (a timer's drift, measured every 100 ms; the worst of
   * the last 5 s): timers, heartbeats and claims of this process run this late. Default 2_000.
   */
  maxEventLoopLagMs?: number;
}

export interface PgQueueRecurringOptions {
  /** Sync this app's @RecurringJob schedules and fire due schedules from this instance. Default true. */
  enabled?: boolean;
  /**
   * Longest sleep between two scans for due schedules: the timer sleeps until the next fire it knows of, and at
   * most this long, which is how soon a schedule made or resumed where no scheduler runs (an instance with
   * `enabled: false`, or SQL) is seen; the instance that makes one through QueueService looks at once.
   * Default 10_000 (an idle app then sends a scan every 10 s, not every second).
   */
  pollIntervalMs?: number;
  /** A code schedule that no running instance has declared for this long stops firing (removed from code). Default 5 minutes. */
  orphanAfterMs?: number;
}

/** The bounds of job.log() (README: "Job logs"), checked at boot. */
export interface PgQueueJobLogsOptions {
  /**
   * Lines kept per job, across its attempts: past it the oldest go first (`QueueService.get(id).logsDropped` counts
   * them). An integer from 1 to 10,000. Default 100.
   */
  maxLines?: number;
  /** Characters kept per line: a longer line is cut there and ends with "... [truncated]". An integer from 1 to 100,000. Default 2,000. */
  maxLineLength?: number;
}

export interface PgQueueModuleOptions {
  /** Reuse this DataSource (what makes transactional enqueue possible). */
  dataSource?: DataSource;
  /** Or open a connection of the module's own. */
  connection?: PgQueueConnectionOptions;
  /**
   * A direct (session) connection URL for LISTEN. Behind PgBouncer in transaction mode LISTEN silently
   * hears nothing, so point this at PostgreSQL itself. Only the fields the URL holds replace the DataSource's
   * settings (a password function, ssl and `extra` stay). Also the session that migrations run outside a
   * transaction hold their lock on. Default: the DataSource's own connection settings.
   */
  listenerUrl?: string;
  /**
   * Connections of the queue's API pool (`application_name` `nestjs-pg-queue api`): the statements the app's
   * calls make (enqueue without a `manager`, `waitFor`, `get`, `cancel`, `retry`, `pause`, `stats`, schedules,
   * flows, metrics and health reads) and what a handler asks through its `Job` (steps, spawned children, flow
   * reads). Opened with the DataSource's connection settings, on demand. An enqueue that waits on your
   * transaction's lock (a held `uniqueKey`) holds one of these while it waits; the workers' heartbeats, outcomes
   * and claims and the maintenance passes have pools of their own (`leasePoolSize`, `maintenancePoolSize`), so
   * they never wait behind it. Size it for the enqueues your app makes at once. Default 5.
   */
  poolSize?: number;
  /**
   * Connections of the workers' pool (`application_name` `nestjs-pg-queue leases`): heartbeats (lease renewals
   * and start marks), outcome writes, put-backs, claims and the instance's registration. None of its statements
   * waits on a lock your app's transactions can hold (claims skip locked rows), and heartbeats, outcome batches
   * and put-backs take turns, so 2 is enough for a few queues: one for the turn-taking writes, one for claims.
   * Add one for every few busy queues. Opened only in an instance with workers. Default 2.
   */
  leasePoolSize?: number;
  /**
   * Connections of the maintenance pool (`application_name` `nestjs-pg-queue maintenance`): the sweeper, the
   * pruner, the history mover and the recurring-job scheduler's tick (each pass runs alone, one statement at
   * a time). Opened only when maintenance or recurring jobs run in this instance. Default 1.
   */
  maintenancePoolSize?: number;
  /**
   * A queue statement that runs longer than this is cancelled (server-side `statement_timeout`, plus a
   * client-side timeout slightly above it that also covers a dead network). 0 sets none. Default 60_000.
   */
  statementTimeoutMs?: number;
  /** Waiting for a connection (to open, or for a free one in one of the queue's pools) fails after this long. Default 10_000. */
  connectTimeoutMs?: number;
  /**
   * Set when the DataSource (or `connection`) goes through a transaction pooler such as PgBouncer in
   * transaction mode: the queue then sends unnamed statements (named prepared statements fail there) and no
   * startup parameters (PgBouncer refuses them; set statement_timeout on the role instead). Needs
   * `listenerUrl` pointing at PostgreSQL itself (boot fails without it): LISTEN and the migrations run
   * outside a transaction need a real session. Default false.
   */
  transactionPooler?: boolean;
  /** Run the queue's migrations at start-up, under an advisory lock. Default true. */
  migrationsRun?: boolean;
  /** Process jobs in this instance. False makes an enqueue-only instance (an API server, a script). Default true. */
  workers?: boolean;
  /**
   * Per-queue settings, over the @JobHandler options. `maxAttempts` here also applies at enqueue, so give
   * every instance (workers and enqueue-only ones) the same `queues`.
   */
  queues?: Record<string, JobHandlerOptions>;
  /** Identifies this worker process in lease columns and logs. Default: hostname:pid:random. */
  workerId?: string;
  /** A claim holds a job this long; running jobs renew it every heartbeatMs. Default 30_000. */
  leaseMs?: number;
  /** Default leaseMs / 3. */
  heartbeatMs?: number;
  /** Safety-net poll while LISTEN is up (NOTIFY does the real waking). Default 30_000. */
  pollIntervalMs?: number;
  /** Poll while the LISTEN connection is down. Default 1_000. */
  fallbackPollIntervalMs?: number;
  /** On shutdown, running jobs get this long to finish before they are aborted and put back. Default 10_000. */
  shutdownGraceMs?: number;
  /** Largest payload accepted at enqueue, in bytes of JSON. Default 1 MiB. */
  maxPayloadBytes?: number;
  /**
   * Largest handler result stored with a completed job, in bytes of JSON (README: Results). A larger result,
   * or one that is not JSON, fails the attempt for good (no retry: it would return the same), with an error
   * that names the size and this limit. Default 64 KiB.
   */
  maxResultBytes?: number;
  maintenance?: PgQueueMaintenanceOptions;
  /**
   * Enqueues join the transaction of the surrounding `@Transactional()` call of `@nestjs-cls/transactional`
   * (any of its adapters whose transaction is a client `manager` accepts: TypeORM, Prisma, Drizzle, Kysely, pg)
   * when they are given no `manager`; outside one they autocommit as always. `true` uses the default
   * TransactionHost; `{ connectionName }` the one of a named ClsPluginTransactional. Needs @nestjs-cls/transactional
   * installed and its plugin registered (docs/guides/transactional-enqueue.md). Default false.
   */
  ambientTransactions?: boolean | { connectionName: string };
  /** Recurring jobs (@RecurringJob, QueueService.upsertSchedule). */
  recurring?: PgQueueRecurringOptions;
  /** The bounds of progress that readiness, the metrics and `pg-queue doctor` check (README: Health). */
  health?: PgQueueHealthOptions;
  /** The bounds of the lines handlers write with job.log() (README: "Job logs"): 100 lines per job, 2,000 characters per line. */
  jobLogs?: PgQueueJobLogsOptions;
}

/** Given next to the options of forRoot / forRootAsync (known when the module is defined). */
export interface PgQueueModuleExtras {
  /** Register QueueService globally. Default true. */
  isGlobal?: boolean;
  /** Reuse the TypeOrmModule DataSource of this name when neither dataSource nor connection is given. */
  dataSourceName?: string;
  /**
   * The database's name, when the app's queues live in more than one database: one PgQueueModule per database, all
   * but one named. A named one owns the queues its `queues` option lists; the one without a name owns every other
   * queue. Its services are injected by name (`@InjectQueueService('reports')`); any QueueService enqueues into the
   * database that owns the job's queue (docs/guides/several-databases.md).
   */
  name?: string;
}
