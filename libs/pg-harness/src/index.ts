export { startPostgres } from './start-postgres.js';
export type { PostgresServer, PostgresServerSource, StartPostgresOptions } from './start-postgres.js';
export { PostgresSetupError } from './run-as-postgres.js';
export { createDatabase, createTestDatabase, dropDatabase, withDatabaseName } from './databases.js';
export { pgBouncerAvailable, startPgBouncer, PGBOUNCER_BINARY } from './pgbouncer.js';
export type { PgBouncer, StartPgBouncerOptions } from './pgbouncer.js';
