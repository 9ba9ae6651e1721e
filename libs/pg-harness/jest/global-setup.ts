import { startPostgres } from '../src/start-postgres';

/**
 * One PostgreSQL server for the whole run (DATABASE_URL, a container, or embedded); each test file makes
 * its own database on it. The URL reaches the test workers through the environment.
 */
export default async function globalSetup(): Promise<void> {
  const server = await startPostgres({ log: process.env.PG_HARNESS_VERBOSE ? console.log : undefined });
  (globalThis as Record<string, unknown>).__pgHarnessServer = server;
  process.env.PG_QUEUE_TEST_SERVER_URL = server.url;
  console.log(`\n[pg-harness] PostgreSQL (${server.source}) at ${server.url.replace(/:[^:@/]*@/, ':***@')}`);
}
