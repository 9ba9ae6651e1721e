import { Logger } from '@nestjs/common';
import { DataSource, Migration, MigrationExecutor, type MigrationInterface, type QueryRunner } from 'typeorm';
import { PG_QUEUE_MIGRATIONS } from '../migrations/index.js';
import { MIGRATION_LOCK_WAIT } from '../pg-queue.messages.js';
import { MIGRATION_LOCK_TIMEOUT_MS } from '../store/database.sql.js';
import { SQL } from '../store/job.sql.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';

/**
 * Runs the queue's own migrations (and only those) at start-up, on one connection of the given DataSource.
 *
 * Each pending migration runs in a transaction of its own that first takes a transaction-scoped advisory
 * lock and re-checks the migrations table, so ten instances booting at once migrate once, and the lock
 * works through a transaction pooler (PgBouncer in transaction mode), where a session lock would be taken
 * and released on different server connections. A migration with `transaction = false` (CREATE INDEX
 * CONCURRENTLY) runs outside any transaction on a direct session that holds the same lock as a session
 * lock from the re-check to the record, so two instances never build one index at once (two concurrent
 * builds on a table deadlock, and IF NOT EXISTS then skips over the loser's invalid index). That session is
 * the runner's own connection, or, behind a transaction pooler, one that `openSession` dials directly.
 * Every lock is taken by polling (see SQL.migrationTryLock), and migrations run without the app's
 * statement_timeout, waiting at most MIGRATION_LOCK_TIMEOUT_MS for a table lock (retryOnLockTimeout).
 *
 * Rows go to the DataSource's TypeORM migrations table (its name, schema and row format, through TypeORM's
 * own MigrationExecutor), so an app that lists PG_QUEUE_MIGRATIONS in its own DataSource and this runner
 * agree on what already ran.
 */
export async function runQueueMigrations(
  dataSource: DataSource,
  migrations: MigrationClass[] = PG_QUEUE_MIGRATIONS,
  options: RunQueueMigrationsOptions = {},
): Promise<string[]> {
  const logger = new PgQueueLogger('PgQueue');
  const queryRunner = dataSource.createQueryRunner('master');
  const table = new MigrationsTable(dataSource, queryRunner);
  const applied: string[] = [];
  let session: Session | undefined;
  try {
    await queryRunner.connect();
    await underLock(queryRunner, () => table.createIfMissing());
    const done = await table.names();
    for (const migration of queueMigrations(migrations)) {
      if (done.has(migration.name)) continue;
      let ran: boolean;
      if (migration.instance?.transaction === false) {
        const direct = (session ??= await openSession(dataSource, queryRunner, table, options.openSession));
        ran = await retryOnLockTimeout(direct.runner, migration.name, logger, () => runOutsideTransaction(direct, migration));
      } else {
        ran = await retryOnLockTimeout(queryRunner, migration.name, logger, () =>
          underLock(queryRunner, async () => {
            if ((await table.names()).has(migration.name)) return false;
            await up(queryRunner, migration);
            await table.record(migration);
            return true;
          }),
        );
      }
      if (ran) applied.push(migration.name);
    }
  } catch (error) {
    logger.error(`queue migrations stopped${applied.length ? ` after applying ${applied.join(', ')}` : ''}: ${String(error)}`);
    throw error;
  } finally {
    await session?.close();
    await queryRunner.release();
  }
  if (applied.length > 0) logger.log(`applied queue migrations: ${applied.join(', ')}`);
  return applied;
}

export interface RunQueueMigrationsOptions {
  /**
   * Dials a direct (session) DataSource, with the same migrations table, for the migrations that run
   * outside a transaction; needed when `dataSource` goes through a transaction pooler. Destroyed after.
   */
  openSession?: () => Promise<DataSource>;
}

const LOCK_POLL_MS = 100;

interface Session {
  runner: QueryRunner;
  table: MigrationsTable;
  close(): Promise<void>;
}

async function openSession(dataSource: DataSource, queryRunner: QueryRunner, table: MigrationsTable, dial: (() => Promise<DataSource>) | undefined): Promise<Session> {
  if (!dial) return { runner: queryRunner, table, close: async () => undefined };
  const direct = await dial();
  const runner = direct.createQueryRunner('master');
  try {
    await runner.connect();
  } catch (error) {
    await direct.destroy();
    throw error;
  }
  return {
    runner,
    table: new MigrationsTable(direct, runner),
    close: async () => {
      await runner.release();
      await direct.destroy();
    },
  };
}

/**
 * Runs `work` (a migration, which rolls back or releases what it took when it fails) until it does not fail for
 * lock_timeout: a migration waits for a table lock at most MIGRATION_LOCK_TIMEOUT_MS, since every statement on the
 * table queues behind a waiting ALTER. Between tries the traffic goes on; each give-up is logged with who holds
 * the lock. Retried for as long as it takes, as a wait without lock_timeout would have waited.
 */
async function retryOnLockTimeout<T>(runner: QueryRunner, migration: string, logger: Logger, work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (!isLockTimeout(error)) throw error;
      const holders = (await runner.query(SQL.migrationBlockers).catch(() => [])) as { pid: number; application_name: string; state: string; xact_s: number | null }[];
      const retryInMs = Math.min(5_000, 250 * 2 ** (attempt - 1));
      const named = holders.map((h) => `pid ${h.pid} (${h.application_name ? `"${h.application_name}", ` : ''}${h.state}${h.xact_s === null ? '' : `, transaction open ${h.xact_s} s`})`).join(', ');
      logger.warn(MIGRATION_LOCK_WAIT(migration, MIGRATION_LOCK_TIMEOUT_MS, named, retryInMs, attempt));
      await sleep(retryInMs);
    }
  }
}

/** lock_not_available: what a statement that waited lock_timeout fails with (TypeORM keeps pg's code). */
function isLockTimeout(error: unknown): boolean {
  const e = error as { code?: string; driverError?: { code?: string } };
  return (e?.code ?? e?.driverError?.code) === '55P03';
}

/** Runs `work` in a transaction that holds the migration lock; commits, or rolls back and rethrows. */
async function underLock<T>(queryRunner: QueryRunner, work: () => Promise<T>): Promise<T> {
  for (;;) {
    await queryRunner.startTransaction();
    try {
      await queryRunner.query(SQL.migrationTimeouts);
      const [{ held }] = (await queryRunner.query(SQL.migrationTryLock)) as { held: boolean }[];
      if (!held) {
        // A fresh transaction per try, so no snapshot is held between tries whatever the isolation level.
        await queryRunner.rollbackTransaction();
        await sleep(LOCK_POLL_MS);
        continue;
      }
      const result = await work();
      await queryRunner.commitTransaction();
      return result;
    } catch (error) {
      if (queryRunner.isTransactionActive) await queryRunner.rollbackTransaction().catch(() => undefined);
      throw error;
    }
  }
}

/** Runs `work` on the session while it holds the migration lock, without the session's timeouts. */
async function underSessionLock<T>(runner: QueryRunner, work: () => Promise<T>): Promise<T> {
  await runner.query(SQL.migrationSessionTimeouts);
  let result: T;
  try {
    while (!((await runner.query(SQL.migrationSessionTryLock)) as { held: boolean }[])[0].held) await sleep(LOCK_POLL_MS);
    try {
      result = await work();
    } catch (error) {
      // The migration's own error is the one to report; a connection that died has dropped the lock anyway.
      await runner.query(SQL.migrationSessionUnlock).catch(() => undefined);
      throw error;
    }
    await runner.query(SQL.migrationSessionUnlock);
  } catch (error) {
    await runner.query(SQL.migrationSessionTimeoutsReset).catch(() => undefined);
    throw error;
  }
  await runner.query(SQL.migrationSessionTimeoutsReset);
  return result;
}

async function runOutsideTransaction({ runner, table }: Session, migration: Migration): Promise<boolean> {
  return underSessionLock(runner, async () => {
    if ((await table.names()).has(migration.name)) return false; // another instance ran it meanwhile
    await up(runner, migration);
    await table.record(migration);
    return true;
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function up(queryRunner: QueryRunner, migration: Migration): Promise<void> {
  await queryRunner.beforeMigration();
  await migration.instance!.up(queryRunner);
  await queryRunner.afterMigration();
}

type MigrationClass = new () => MigrationInterface;

function queueMigrations(migrations: MigrationClass[]): Migration[] {
  return migrations.map((M) => {
    const instance = new M();
    const name = instance.name ?? M.name;
    return new Migration(undefined, Number(name.slice(-13)), name, instance);
  }).sort((a, b) => a.timestamp - b.timestamp);
}

/** TypeORM's own bookkeeping of the migrations table (table name, schema, column types, row format). */
class MigrationsTable extends MigrationExecutor {
  constructor(dataSource: DataSource, private readonly runner: QueryRunner) {
    super(dataSource, runner);
  }

  createIfMissing(): Promise<void> {
    return this.createMigrationsTableIfNotExist(this.runner);
  }

  async names(): Promise<Set<string>> {
    return new Set((await this.loadExecutedMigrations(this.runner)).map((m) => m.name));
  }

  record(migration: Migration): Promise<void> {
    return this.insertExecutedMigration(this.runner, migration);
  }
}
