import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { autocommitQuery } from '../src/store/autocommit-query.js';
import { sqlPool, waitFor } from './support/test-app.js';

// The store's statements run autocommit (autocommit-query.ts): one that PostgreSQL aborts as a deadlock's victim
// was rolled back whole and runs again. Here a real deadlock: the statement holds table b and waits for table a,
// which a transaction holds while it then asks for b. The statement waited first, so its deadlock check runs first
// (deadlock_timeout: 200 ms for it, 20 s for the transaction) and PostgreSQL aborts it; the transaction then gets b,
// commits, and the second run returns.
describe('a statement picked as a deadlock victim runs again', () => {
  let url: string;
  let db: pg.Pool;

  beforeAll(async () => {
    url = await createTestDatabase('deadlock_retry');
    db = sqlPool(url);
    await db.query(`CREATE TABLE a (v int); CREATE TABLE b (v int); INSERT INTO a VALUES (1); INSERT INTO b VALUES (2)`);
  });
  afterAll(async () => {
    await db?.end();
  });

  it('returns its rows after the deadlock, and the other transaction commits', async () => {
    const deadlocks = async () => (await db.query<{ n: number }>(`SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = current_database()`)).rows[0].n;
    const before = await deadlocks();
    const holder = await db.connect();
    const statements = new pg.Pool({ connectionString: url, max: 1, options: '-c deadlock_timeout=200' });
    try {
      // Only the statement looks for the deadlock in time (the backend whose deadlock_timeout runs out first checks,
      // and aborts itself): under load the holder's check once ran first, and the holder was the one aborted.
      await holder.query(`SET deadlock_timeout = '20s'`);
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE a IN ACCESS EXCLUSIVE MODE');
      // b first (parse analysis opens the relations in the order they are written), then a: waits for the holder.
      const query = autocommitQuery<{ v: number }>(statements, { text: `SELECT (SELECT v FROM b) + (SELECT v FROM a) AS v` });
      query.catch(() => undefined);
      await waitFor('the statement waiting for table a', async () => {
        const { rows } = await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'a' AND NOT l.granted`,
        );
        return rows[0].n === 1;
      }, 10_000, 10);
      // Closes the cycle: the holder now waits for the statement's lock on b.
      await holder.query('LOCK TABLE b IN ACCESS EXCLUSIVE MODE');
      await holder.query('COMMIT');
      const result = await query;
      expect(result.rows).toEqual([{ v: 3 }]);
      expect((await deadlocks()) - before).toBe(1);
    } finally {
      holder.release();
      await statements.end();
    }
  }, 30_000);
});
