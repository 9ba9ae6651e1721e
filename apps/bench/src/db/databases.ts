import { createDatabase, dropDatabase } from '@internal/pg-harness';
import { withClient } from './sql.js';

/** A fresh, empty database for one system in one scenario of one run; dropped right after. */
export async function withFreshDatabase<T>(serverUrl: string, name: string, work: (url: string) => Promise<T>): Promise<T> {
  const url = await createDatabase(serverUrl, name);
  try {
    return await work(url);
  } finally {
    await dropDatabase(serverUrl, name).catch((error: unknown) => console.error(`could not drop ${name}: ${String(error)}`));
  }
}

/**
 * Flushes what the setup wrote (seeding, schema) before a measured phase starts, so that no system pays for
 * a checkpoint of the previous system's data, and each measured phase starts from the same clean state.
 */
export async function checkpoint(serverUrl: string): Promise<void> {
  await withClient(serverUrl, (c) => c.query('CHECKPOINT'));
}

/**
 * A backlog that built up over time has been vacuumed and analysed by autovacuum; a just-seeded one has not.
 * VACUUM ANALYZE gives every system the same starting point (visibility map, hint bits, planner statistics).
 */
export async function vacuumAnalyze(url: string, relations: string[]): Promise<void> {
  await withClient(url, async (c) => {
    for (const relation of relations) await c.query(`VACUUM (ANALYZE) ${relation}`);
  });
}

export async function seed(url: string, sql: string, jobs: number, spread: boolean): Promise<void> {
  await withClient(url, (c) => c.query(sql, [jobs, spread]));
}

export async function seedFuture(url: string, sql: string, jobs: number): Promise<void> {
  await withClient(url, (c) => c.query(sql, [jobs]));
}

/**
 * Deadlocks PostgreSQL detected in one database (each one stalled two statements for deadlock_timeout, 1 s,
 * before one was cancelled). Read after the workers have exited: a backend flushes its counters on exit.
 */
export async function deadlockCount(serverUrl: string, database: string): Promise<number> {
  return withClient(serverUrl, async (c) => {
    const { rows } = await c.query<{ n: string }>('SELECT deadlocks AS n FROM pg_stat_database WHERE datname = $1', [database]);
    return Number(rows[0]?.n ?? 0);
  });
}

/** The server's WAL insert position in bytes: the difference of two readings is the WAL written in between. */
export async function walPositionBytes(serverUrl: string): Promise<number> {
  return withClient(serverUrl, async (c) => Number((await c.query<{ b: number }>(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS b`)).rows[0].b));
}

export interface RowWrites {
  inserted: number;
  updated: number;
  /** Of the updates, those that were HOT: no new index entry (the changed columns are in no index). */
  hotUpdated: number;
  deleted: number;
}

/**
 * Row versions written to `relations` since the database was created (pg_stat_user_tables). Read once the
 * system's connections have closed: a backend reports its counters when it goes idle, at most once a second,
 * and for good when it exits.
 */
export async function rowWrites(url: string, relations: string[]): Promise<RowWrites> {
  return withClient(url, async (c) => {
    const { rows } = await c.query<RowWrites>(
      `SELECT coalesce(sum(n_tup_ins), 0)::float8 AS inserted, coalesce(sum(n_tup_upd), 0)::float8 AS updated,
              coalesce(sum(n_tup_hot_upd), 0)::float8 AS "hotUpdated", coalesce(sum(n_tup_del), 0)::float8 AS deleted
       FROM pg_stat_user_tables WHERE relid = ANY($1::regclass[])`,
      [relations],
    );
    return rows[0];
  });
}
