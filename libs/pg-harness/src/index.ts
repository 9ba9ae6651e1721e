export { startPostgres } from './start-postgres.js';
export type { PostgresServer, PostgresServerSource, StartPostgresOptions } from './start-postgres.js';
export { PostgresSetupError } from './run-as-postgres.js';
export { createDatabase, createTestDatabase, dropDatabase, withDatabaseName } from './databases.js';
