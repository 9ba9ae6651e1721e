import { afterAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import pg from 'pg';
import type { PgQueueModuleOptions } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { Connection } from '../src/cli/connection.js';
import { up as migrateUp } from '../src/cli/migrations.js';
import { DISTRIBUTED_POSTGRES_GUIDE } from '../src/pg-queue.messages.js';
import { startApp, waitFor } from './support/test-app.js';

/**
 * The boot refuses a server that is not PostgreSQL proper, by name, before it writes anything. A real server is made
 * to report another engine: a version() (and current_setting()) of a schema the database's search_path puts before
 * pg_catalog shadows the built-in one for the queue's unqualified call, answering as a CockroachDB or YugabyteDB
 * does. `public` stays first, so that what the queue creates lands where it would.
 */
async function databaseReporting(label: string, version: string, limitlessTableMode?: string): Promise<string> {
  const url = await createTestDatabase(label);
  await withClient(url, async (c) => {
    const [{ db }] = (await c.query<{ db: string }>('SELECT current_database() AS db')).rows;
    await c.query(`CREATE SCHEMA fake; CREATE FUNCTION fake.version() RETURNS text LANGUAGE sql AS $$ SELECT ${literal(version)} $$`);
    if (limitlessTableMode !== undefined) {
      await c.query(`CREATE FUNCTION fake.current_setting(setting_name text, missing_ok boolean) RETURNS text LANGUAGE sql AS $$
        SELECT CASE WHEN setting_name = 'rds_aurora.limitless_create_table_mode' THEN ${literal(limitlessTableMode)} ELSE pg_catalog.current_setting(setting_name, missing_ok) END $$`);
    }
    await c.query(`ALTER DATABASE "${db}" SET search_path = public, fake, pg_catalog`);
  });
  return url;
}

/** What the database holds after a boot: the queue's table and the migrations table, if made; the queue's connections. */
async function held(url: string): Promise<{ jobs: string | null; migrations: string | null; queueConnections: number; reported: string }> {
  return withClient(url, async (c) => {
    const [row] = (
      await c.query(`SELECT to_regclass('public.background_jobs')::text AS jobs, to_regclass('public.migrations')::text AS migrations,
        (SELECT count(*)::int FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'nestjs-pg-queue%') AS "queueConnections",
        version() AS reported`)
    ).rows;
    return row;
  });
}

/** What a refused boot left behind, once its connections are gone (their backends end just after the pools do). */
function leftBehind(url: string): ReturnType<typeof held> {
  return waitFor('the queue connections to end', async () => {
    const now = await held(url);
    return now.queueConnections === 0 && now;
  });
}

describe('boot check: a server that is not PostgreSQL proper is refused by name', () => {
  const cases = [
    { engine: 'CockroachDB', version: 'CockroachDB CCL v23.1.11 (x86_64-pc-linux-gnu, built 2023/09/27 01:53:43, go1.19.10)' },
    { engine: 'YugabyteDB', version: 'PostgreSQL 15.2-YB-2.25.0.0-b0 on aarch64-unknown-linux-gnu, compiled by clang version 17.0.6, 64-bit' },
    { engine: 'Aurora PostgreSQL Limitless Database', version: 'PostgreSQL 16.6 on aarch64-unknown-linux-gnu', limitlessTableMode: 'standard' },
  ];

  it.each(cases)('$engine: the boot fails naming it and linking the guide; nothing is written', async ({ engine, version, limitlessTableMode }) => {
    const url = await databaseReporting(engine, version, limitlessTableMode);
    const error = await bootError(url, { workers: false });
    expect(error).toContain(`this server is ${engine} (version(): ${JSON.stringify(version)})`);
    expect(error).toContain(DISTRIBUTED_POSTGRES_GUIDE);
    expect(await leftBehind(url)).toEqual({ jobs: null, migrations: null, queueConnections: 0, reported: version });
  });

  it('also without migrations at boot (migrationsRun: false), when the server answers', async () => {
    const url = await databaseReporting('crdb-no-migrations', cases[0].version);
    expect(await bootError(url, { migrationsRun: false })).toContain('this server is CockroachDB');
    expect(await leftBehind(url)).toMatchObject({ jobs: null, queueConnections: 0 });
  });

  it('`pg-queue migrate` refuses it as the boot does', async () => {
    const url = await databaseReporting('yb-cli', cases[1].version);
    await expect(migrateUp(new Connection(url, false), {})).rejects.toThrow('this server is YugabyteDB');
    expect(await leftBehind(url)).toMatchObject({ jobs: null, migrations: null, queueConnections: 0 });
  });
});

describe('boot check: PostgreSQL itself boots', () => {
  let app: INestApplicationContext | undefined;
  afterAll(async () => {
    await app?.close();
  });

  it('the real server, and one whose shadowed version() reports PostgreSQL, migrate and start', async () => {
    const plain = await createTestDatabase('engine-postgres');
    app = await startApp(plain, { queue: { workers: false } });
    const real = await held(plain);
    expect(real.jobs).toBe('background_jobs');
    expect(real.reported).toMatch(/^PostgreSQL \d+/);
    await app.close();
    // The shadowing itself refuses nothing: the same banner through the same search_path boots.
    const shadowed = await databaseReporting('engine-shadowed', real.reported);
    app = await startApp(shadowed, { queue: { workers: false } });
    expect(await held(shadowed)).toMatchObject({ jobs: 'background_jobs', migrations: 'migrations', reported: real.reported });
  });
});

/** The boot's error; an app that booted is closed first, so that a regression fails the test instead of hanging Jest. */
async function bootError(url: string, queue: PgQueueModuleOptions): Promise<string> {
  const booted = await startApp(url, { queue, logLevels: [] }).catch((error: unknown) => error);
  if (!(booted instanceof Error)) {
    await (booted as INestApplicationContext).close();
    throw new Error('the app booted');
  }
  return booted.message;
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function literal(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}
