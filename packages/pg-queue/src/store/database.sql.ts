// The database itself: which engine and which database a connection is on, and the migrations' locks and timeouts.
import { ADVISORY_LOCK } from '../pg-queue.constants.js';

/** How long a migration waits for a table lock before it gives up and tries again (see SQL.migrationTimeouts). */
export const MIGRATION_LOCK_TIMEOUT_MS = 1_000;

export const DATABASE_SQL = {
  // Which database a connection is on (databases/database-check.ts): its name and its server's start time, which
  // name one server whatever the route to it (TCP or a Unix socket, PgBouncer or not) and need no privilege; the
  // address and port only for messages.
  databaseIdentity: `SELECT current_database() AS database, pg_postmaster_start_time()::text AS started,
    coalesce(host(inet_server_addr()), 'a Unix socket') AS host, inet_server_port() AS port`,

  // What the server is (connection/server-engine.ts), asked once at boot. version() unqualified, as an app's own call
  // would be: pg_catalog is searched first unless a search_path names it later (the engine tests do, to make a real
  // server report CockroachDB). Alone in its statement: an engine that is not PostgreSQL may lack what the next reads.
  serverVersion: `SELECT version() AS version`,
  // On a server that reports PostgreSQL: what an engine built on it adds (both null on PostgreSQL itself).
  serverAdditions: `SELECT current_setting('rds_aurora.limitless_create_table_mode', true) AS limitless,
    (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'citus') AS citus`,

  // Migrations take the lock by polling, never by a blocking wait: a backend waiting on a lock holds a
  // snapshot, and a CREATE INDEX CONCURRENTLY run by the holder waits for every older snapshot (deadlock).
  // Transaction-scoped, so it also works through a transaction pooler; released at COMMIT or ROLLBACK.
  migrationTryLock: `SELECT pg_try_advisory_xact_lock(${ADVISORY_LOCK.migrate}) AS held`,
  // Session-scoped, on a direct connection, for the migrations that run outside a transaction.
  migrationSessionTryLock: `SELECT pg_try_advisory_lock(${ADVISORY_LOCK.migrate}) AS held`,
  migrationSessionUnlock: `SELECT pg_advisory_unlock(${ADVISORY_LOCK.migrate})`,
  // Migrations must not inherit the app's statement_timeout: an index build on a big table takes minutes. But a
  // table lock is waited for at most MIGRATION_LOCK_TIMEOUT_MS: PostgreSQL queues every later statement on the
  // table behind a waiting ALTER, so a long wait would stop enqueues and claims; the runner backs off and tries
  // again. (Index builds CONCURRENTLY wait for old transactions without blocking anyone: lock_timeout off there.)
  migrationTimeouts: `SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = ${MIGRATION_LOCK_TIMEOUT_MS}`,
  migrationSessionTimeouts: `SET statement_timeout = 0; SET lock_timeout = ${MIGRATION_LOCK_TIMEOUT_MS}`,
  migrationSessionTimeoutsReset: `RESET statement_timeout; RESET lock_timeout`,
  // `pg-queue migrate down`: an operator's command, which waits as long as it takes.
  migrationSessionTimeoutsOff: `SET statement_timeout = 0; SET lock_timeout = 0`,
  // Who holds a lock on the queue's tables (for the log line of a migration that gave up waiting): the oldest first.
  migrationBlockers: `
    SELECT a.pid, a.application_name, a.state, floor(extract(epoch FROM now() - a.xact_start))::int AS xact_s
    FROM pg_stat_activity AS a
    WHERE a.pid <> pg_backend_pid() AND a.pid IN (
      SELECT l.pid FROM pg_locks AS l JOIN pg_class AS c ON c.oid = l.relation
      WHERE l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND left(c.relname, 11) = 'background_')
    ORDER BY a.xact_start NULLS LAST
    LIMIT 5`,
} as const;
