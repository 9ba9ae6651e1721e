import pg from 'pg';

/** The same server URL pointing at another database. */
export function withDatabaseName(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Creates a fresh, empty database on the server and returns its URL (tests isolate per file). */
export async function createDatabase(serverUrl: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
  return withDatabaseName(serverUrl, name);
}

export async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

let counter = 0;

/** A fresh database for one test file, on the server the Jest global setup started. */
export async function createTestDatabase(label: string): Promise<string> {
  const server = process.env.PG_QUEUE_TEST_SERVER_URL;
  if (!server) throw new Error('PG_QUEUE_TEST_SERVER_URL is not set: run tests through jest (its global setup starts PostgreSQL).');
  const name = `t_${label.replace(/[^a-z0-9]+/gi, '_').toLowerCase().slice(0, 30)}_${process.pid}_${++counter}`;
  return createDatabase(server, name);
}
