export { startPostgres } from './start-postgres.js';
export type { PostgresServer, PostgresServerSource, StartPostgresOptions } from './start-postgres.js';
export { createDatabase, createTestDatabase, dropDatabase, withDatabaseName } from './databases.js';
