import { describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { DataSource, type MigrationInterface, type QueryRunner } from 'typeorm';
import { PG_QUEUE_MIGRATIONS, QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { runQueueMigrations } from '../src/connection/run-queue-migrations.js';
import { createIndexConcurrently } from '../src/migrations/concurrent-index.js';
import { CreateSlowRows1900000000001, SlowIndex1900000000002 } from './support/slow-index-migrations.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

class SleepInTransaction1900000000003 implements MigrationInterface {
  name = 'SleepInTransaction1900000000003';
  async up(q: QueryRunner) {
    await q.query(`SELECT pg_sleep(0.5)`);
  }
  async down() {}
}
class SleepOutsideTransaction1900000000004 implements MigrationInterface {
  name = 'SleepOutsideTransaction1900000000004';
  transaction = false;
  async up(q: QueryRunner) {
    await q.query(`SELECT pg_sleep(0.5)`);
  }
  async down() {}
}

let failNextRun = true;
class FailsOnce1900000000005 implements MigrationInterface {
  name = 'FailsOnce1900000000005';
  transaction = false;
  async up(q: QueryRunner) {
    if (failNextRun) {
      failNextRun = false;
      await q.query(`SELECT 1 / 0`);
    }
  }
  async down() {}
}

const opened: DataSource[] = [];
async function dataSourceOf(url: string, extra: Record<string, unknown> = {}): Promise<DataSource> {
  const dataSource = new DataSource({ type: 'postgres', url, extra: { max: 1, ...extra } });
  await dataSource.initialize();
  opened.push(dataSource);
  return dataSource;
}
async function closeAll() {
  await Promise.all(opened.splice(0).map((d) => d.destroy()));
}

describe('migrations that run outside a transaction', () => {
  it('two runners racing a CREATE INDEX CONCURRENTLY migration: no deadlock, recorded once, the index valid', async () => {
    const url = await createTestDatabase('cicrace');
    const all = [...PG_QUEUE_MIGRATIONS, CreateSlowRows1900000000001, SlowIndex1900000000002];
    const [a, b] = [await dataSourceOf(url), await dataSourceOf(url)];
    const t0 = Date.now();
    const results = await Promise.allSettled([runQueueMigrations(a, all), runQueueMigrations(b, all)]);
    const elapsed = Date.now() - t0;
    expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok']);
    const db = sqlPool(url);
    const { rows: recorded } = await db.query(`SELECT count(*)::int AS n FROM migrations WHERE name = 'SlowIndex1900000000002'`);
    const { rows: index } = await db.query(`SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass('slow_rows_key_idx')`);
    console.log(`two runners racing a ${elapsed} ms index build: recorded ${recorded[0].n}x, index valid: ${index[0]?.valid}`);
    expect(recorded).toEqual([{ n: 1 }]);
    expect(index).toEqual([{ valid: true }]);
    await db.end();
    await closeAll();
  });

  it('createIndexConcurrently builds again an index that a cancelled build left INVALID, and is a no-op once valid', async () => {
    const url = await createTestDatabase('cicrepair');
    const d = await dataSourceOf(url);
    await runQueueMigrations(d, [CreateSlowRows1900000000001]);
    const q = d.createQueryRunner();
    await q.connect();
    await q.query(`SET statement_timeout = 300`);
    await expect(q.query(`CREATE INDEX CONCURRENTLY slow_rows_key_idx ON slow_rows (slow_key(n))`)).rejects.toThrow(/statement timeout/);
    await q.query(`RESET statement_timeout`);
    const validity = async () => (await q.query(`SELECT indexrelid::int AS oid, indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass('slow_rows_key_idx')`)) as { oid: number; valid: boolean }[];
    expect(await validity()).toEqual([{ oid: expect.any(Number), valid: false }]); // what IF NOT EXISTS would keep
    await createIndexConcurrently(q, 'slow_rows_key_idx', 'ON slow_rows (slow_key(n))');
    const [built] = await validity();
    expect(built.valid).toBe(true);
    await createIndexConcurrently(q, 'slow_rows_key_idx', 'ON slow_rows (slow_key(n))');
    expect(await validity()).toEqual([built]); // same index, not rebuilt
    await q.release();
    await closeAll();
  });

  it('migrations ignore the DataSource’s statement_timeout, and a runner waiting on the lock is not cancelled by it', async () => {
    const url = await createTestDatabase('migtimeout');
    const all = [...PG_QUEUE_MIGRATIONS, SleepInTransaction1900000000003, SleepOutsideTransaction1900000000004];
    const [a, b] = [await dataSourceOf(url, { statement_timeout: 200 }), await dataSourceOf(url, { statement_timeout: 200 })];
    const results = await Promise.allSettled([runQueueMigrations(a, all), runQueueMigrations(b, all)]);
    expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok']);
    const db = sqlPool(url);
    const { rows } = await db.query(`SELECT count(*)::int AS n FROM migrations`);
    expect(rows).toEqual([{ n: all.length }]);
    // The runner's connection goes back to the app's pool with the app's own timeout.
    expect(await a.query(`SHOW statement_timeout`)).toEqual([{ statement_timeout: '200ms' }]);
    await db.end();
    await closeAll();
  });

  it('a failed migration outside a transaction releases the lock and gives the connection its timeouts back; the next run applies it', async () => {
    const url = await createTestDatabase('migfail');
    const d = await dataSourceOf(url, { statement_timeout: 200 });
    const other = await dataSourceOf(url);
    const all = [...PG_QUEUE_MIGRATIONS, FailsOnce1900000000005];
    await expect(runQueueMigrations(d, all)).rejects.toThrow(/division by zero/);
    expect(await d.query(`SHOW statement_timeout`)).toEqual([{ statement_timeout: '200ms' }]);
    expect(await runQueueMigrations(other, all)).toEqual(['FailsOnce1900000000005']); // would poll forever if the lock were kept
    await closeAll();
  });

  it('an app running PG_QUEUE_MIGRATIONS with a transaction = false migration needs migrationsTransactionMode each; the module then finds nothing pending', async () => {
    const url = await createTestDatabase('migeach');
    const migrations = [...PG_QUEUE_MIGRATIONS, SleepOutsideTransaction1900000000004];
    const all = new DataSource({ type: 'postgres', url, migrations });
    await all.initialize();
    opened.push(all);
    await expect(all.runMigrations()).rejects.toThrow(/transaction/i); // TypeORM's default 'all' refuses it
    const each = new DataSource({ type: 'postgres', url, migrations, migrationsTransactionMode: 'each' });
    await each.initialize();
    opened.push(each);
    expect(await each.runMigrations()).toHaveLength(migrations.length);
    expect(await runQueueMigrations(each)).toEqual([]);
    const app = await startApp(url, { queue: { dataSource: each, workers: false } });
    await app.get(QueueService).enqueue('q', {});
    await app.close();
    const db = sqlPool(url);
    const { rows } = await db.query(`SELECT name, count(*)::int AS n FROM migrations GROUP BY name HAVING count(*) > 1`);
    expect(rows).toEqual([]);
    await db.end();
    await closeAll();
  });
});

describe('migrations that take a table lock', () => {
  // ADD COLUMN waits for ACCESS EXCLUSIVE, and PostgreSQL queues every later statement on the table behind the
  // waiting ALTER: with lock_timeout off, one app transaction left open for 5 s stopped every enqueue for 5 s.
  // A short lock_timeout (1 s) bounds what traffic waits; the migration backs off, names the blocker and retries.
  it.each([
    ['in a transaction', 'BufferedJobs1764600000000', 'buffered'],
    ['outside a transaction (transaction = false)', 'UniqueJobs1764540000000', 'unique_key'],
  ])('%s: an insert waits at most about a second behind a waiting ALTER; the migration retries and names the blocking pid', async (_how, pending, column) => {
    const url = await createTestDatabase(`miglocktimeout-${column}`);
    const d = await dataSourceOf(url);
    const upTo = PG_QUEUE_MIGRATIONS.findIndex((M) => new M().name === pending);
    const index = (M: (typeof PG_QUEUE_MIGRATIONS)[number]) => PG_QUEUE_MIGRATIONS.indexOf(M);
    // Migrated up to the one before `pending` (later ones, if any, are left out: they build on it).
    await runQueueMigrations(d, PG_QUEUE_MIGRATIONS.filter((M) => index(M) < upTo));
    const db = sqlPool(url);
    const holder = await db.connect();
    const warnings: string[] = [];
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation((message: unknown) => void warnings.push(String(message)));
    try {
      await holder.query(`BEGIN; INSERT INTO background_jobs (queue_name) VALUES ('open-transaction')`);
      const holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      const migrating = runQueueMigrations(d, PG_QUEUE_MIGRATIONS.filter((M) => index(M) <= upTo));
      // The ALTER is waiting for the open transaction.
      await waitFor('the ALTER waiting', async () => (await db.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'ALTER TABLE background_jobs%'`)).rowCount! > 0, 10_000, 10);
      // The app's transaction ends 4 s from now, whatever happens meanwhile.
      const committed = new Promise((r) => setTimeout(r, 4_000)).then(() => holder.query('COMMIT'));
      const t0 = Date.now();
      await db.query(`INSERT INTO background_jobs (queue_name) VALUES ('behind-the-alter')`);
      const waitedMs = Date.now() - t0;
      await committed;
      expect(await migrating).toEqual([pending]);
      expect(waitedMs).toBeLessThan(2_000);
      expect((await db.query(`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'background_jobs' AND column_name = $1`, [column])).rows).toEqual([{ n: 1 }]);
      expect(warnings).toContainEqual(expect.stringMatching(new RegExp(`${pending} waited 1000 ms .* held by pid ${holderPid} `)));
    } finally {
      warn.mockRestore();
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
      await db.end();
      await closeAll();
    }
  }, 60_000);
});
