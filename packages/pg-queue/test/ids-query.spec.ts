import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { queryIds } from '../src/store/ids-query.js';
import { sqlPool, waitFor } from './support/test-app.js';

// The enqueue inserts return their ids through queryIds (store/ids-query.ts): node-postgres's wire messages without
// Describe, so PostgreSQL sends no RowDescription. It must behave as pool.query does in everything else: named
// statements prepared once per connection, every failure a rejection that leaves the pool usable, the client's
// query_timeout honoured, and nothing thrown into the process. With the repository's pg, and with the lowest of the
// peer range (pg 8.11, devDependency "pg-8.11"), whose connection has no map of statements submitted but not yet
// parsed (it came in 8.23).
const require = createRequire(import.meta.url);
const lowest = require('pg-8.11') as typeof pg;
const version = (name: string) => (JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')) as { version: string }).version;
const DRIVERS: [string, typeof pg][] = [
  // With PG_QUEUE_TEST_PG_DRIVER=lowest (jest.config.ts), the tests' own pg is 8.11 too.
  [`pg ${process.env.PG_QUEUE_TEST_PG_DRIVER === 'lowest' ? version('pg-8.11') : version('pg')}`, pg],
  [`pg ${version('pg-8.11')}`, lowest],
];

describe.each(DRIVERS)('queryIds: ids without a result description (%s)', (_, driver) => {
  let url: string;
  let db: pg.Pool;
  const uncaught: unknown[] = [];
  const onUncaught = (error: unknown) => void uncaught.push(error);

  beforeAll(async () => {
    url = await createTestDatabase('ids_query');
    db = sqlPool(url);
    await db.query(`CREATE TABLE t (id bigserial PRIMARY KEY, v int NOT NULL CHECK (v >= 0), at timestamptz)`);
    process.on('uncaughtException', onUncaught);
  });
  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    await db?.end();
  });

  /** One connection, so that every call of a test meets the same session. */
  const onePool = (options: pg.PoolConfig = {}) => new driver.Pool({ connectionString: url, max: 1, ...options });
  const INSERT = { name: 'ids_insert', text: `INSERT INTO t (v, at) SELECT v, $2 FROM unnest($1::int[]) WITH ORDINALITY AS u(v, ord) ORDER BY ord RETURNING id` };

  it('returns each inserted row\'s id, as a string, in the order returned, and prepares a named statement once per connection', async () => {
    const pool = onePool();
    try {
      const at = new Date('2026-01-02T03:04:05.678Z');
      const first = await queryIds(pool, { ...INSERT, values: [[5, 6, 7], at] });
      const second = await queryIds(pool, { ...INSERT, values: [[8], at] });
      expect(first).toHaveLength(3);
      first.concat(second).forEach((id) => expect(typeof id).toBe('string'));
      const { rows } = await db.query<{ id: string; v: number; at: Date }>(`SELECT id::text, v, at FROM t WHERE id = ANY($1::int8[]) ORDER BY id`, [first.concat(second)]);
      expect(rows.map((r) => [r.id, r.v])).toEqual([[first[0], 5], [first[1], 6], [first[2], 7], [second[0], 8]]);
      // The Date went through node-postgres's own conversion, as with pool.query.
      rows.forEach((r) => expect(r.at.toISOString()).toBe(at.toISOString()));
      const prepared = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = 'ids_insert'`);
      expect(prepared.rows[0].n).toBe(1);
      // Unnamed (a transaction pooler): parsed with every call, nothing left prepared.
      const unnamed = await queryIds(pool, { text: INSERT.text, values: [[9, 10], null] });
      expect(unnamed).toHaveLength(2);
      expect((await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_prepared_statements`)).rows[0].n).toBe(1);
    } finally {
      await pool.end();
    }
  });

  it('works on a pool in pg\'s pipeline mode (8.23 on), which refuses Submittables: through pg\'s own Query there', async () => {
    const pool = onePool({ pipeline: true } as pg.PoolConfig);
    try {
      const ids = await queryIds(pool, { ...INSERT, values: [[20, 21], null] });
      expect(ids).toHaveLength(2);
      const { rows } = await db.query<{ v: number }>(`SELECT v FROM t WHERE id = ANY($1::int8[]) ORDER BY id`, [ids]);
      expect(rows.map((r) => r.v)).toEqual([20, 21]);
      await expect(queryIds(pool, { ...INSERT, values: [[-1], null] })).rejects.toMatchObject({ code: '23514' });
      expect(await queryIds(pool, { ...INSERT, values: [[22], null] })).toHaveLength(1);
    } finally {
      await pool.end();
    }
  });

  it('rejects with PostgreSQL\'s error, inserts nothing, and the pool goes on', async () => {
    const pool = onePool();
    try {
      const count = async () => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM t`)).rows[0].n;
      const before = await count();
      // A row that breaks the CHECK: the whole statement is rolled back.
      await expect(queryIds(pool, { ...INSERT, values: [[1, -1], null] })).rejects.toMatchObject({ code: '23514' });
      expect(await count()).toBe(before);
      // A statement PostgreSQL cannot parse: the name is not left half-prepared, so it fails the same way again.
      const bad = { name: 'ids_bad', text: `INSERT INTO t (v) VALUES ($1) RETURNING idd` };
      await expect(queryIds(pool, { ...bad, values: [1] })).rejects.toMatchObject({ code: '42703' });
      await expect(queryIds(pool, { ...bad, values: [1] })).rejects.toMatchObject({ code: '42703' });
      // A value node-postgres cannot convert: nothing is executed, and the connection is in step for the next call.
      const unconvertible = { toPostgres: () => { throw new Error('no text for this value'); } };
      await expect(queryIds(pool, { ...INSERT, values: [unconvertible, null] })).rejects.toThrow('no text for this value');
      expect(await count()).toBe(before);
      expect(await queryIds(pool, { ...INSERT, values: [[11], null] })).toHaveLength(1);
      expect(await count()).toBe(before + 1);
      expect(uncaught).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  it('honours the client\'s query_timeout, and a late answer reaches nobody', async () => {
    const pool = onePool({ query_timeout: 300 });
    try {
      const slow = { name: 'ids_slow', text: `INSERT INTO t (v) SELECT 1 FROM pg_sleep(1) RETURNING id` };
      await expect(queryIds(pool, { ...slow, values: [] })).rejects.toThrow('Query read timeout');
      // The statement still ran to its end on the server: its row is there, and its answer was dropped.
      await waitFor('the slow insert to commit', async () => (await db.query(`SELECT 1 FROM t WHERE v = 1 AND at IS NULL`)).rowCount === 1, 5_000);
      expect(await queryIds(pool, { ...INSERT, values: [[12], null] })).toHaveLength(1);
      expect(uncaught).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  it('rejects when its connection dies in the middle, and the pool replaces the connection', async () => {
    const pool = onePool();
    try {
      const before = (await pool.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`)).rows[0].pid;
      const slow = queryIds(pool, { text: `INSERT INTO t (v) SELECT 2 FROM pg_sleep(5) RETURNING id`, values: [] });
      slow.catch(() => undefined);
      await waitFor('the insert to be running', async () => (await db.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND query LIKE '%pg_sleep(5)%'`, [before])).rowCount === 1, 5_000, 10);
      await db.query(`SELECT pg_terminate_backend($1)`, [before]);
      await expect(slow).rejects.toThrow();
      expect((await db.query(`SELECT 1 FROM t WHERE v = 2`)).rowCount).toBe(0);
      const ids = await queryIds(pool, { ...INSERT, values: [[13], null] });
      expect(ids).toHaveLength(1);
      const after = (await pool.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`)).rows[0].pid;
      expect(after).not.toBe(before);
      expect(uncaught).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  it('rejects on a network error in the middle, and the client\'s error event reaches no one unheard', async () => {
    const pool = onePool();
    const clients: pg.PoolClient[] = [];
    pool.on('connect', (client) => void clients.push(client));
    try {
      await pool.query('SELECT 1');
      const slow = queryIds(pool, { text: `INSERT INTO t (v) SELECT 3 FROM pg_sleep(2) RETURNING id`, values: [] });
      slow.catch(() => undefined);
      await waitFor('the insert to be running', async () => (await db.query(`SELECT 1 FROM pg_stat_activity WHERE query LIKE '%pg_sleep(2)%' AND state = 'active' AND pid <> pg_backend_pid()`)).rowCount === 1, 5_000, 10);
      // What a reset connection looks like to node-postgres: its socket fails.
      (clients[0] as unknown as { connection: { stream: { destroy(error: Error): void } } }).connection.stream.destroy(new Error('connection reset (test)'));
      await expect(slow).rejects.toThrow();
      expect(await queryIds(pool, { ...INSERT, values: [[14], null] })).toHaveLength(1);
      expect(clients).toHaveLength(2);
      expect(uncaught).toEqual([]);
    } finally {
      await pool.end();
    }
  });
});
