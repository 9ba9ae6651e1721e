import { Logger } from '@nestjs/common';
import { DataSource, Migration, MigrationExecutor, type MigrationInterface, type QueryRunner } from 'typeorm';
import { PG_QUEUE_MIGRATIONS } from '../migrations/index.js';
import { SQL } from '../store/job.sql.js';

/**
 * Runs the queue's own migrations (and only those) at start-up, on one connection of the given DataSource.
 *
 * Each pending migration runs in a transaction of its own that first takes a transaction-scoped advisory
 * lock and re-checks the migrations table, so ten instances booting at once migrate once, and the lock
 * works through a transaction pooler (PgBouncer in transaction mode), where a session lock would be taken
 * and released on different server connections. A migration with `transaction = false` (CREATE INDEX
 * CONCURRENTLY) runs outside any transaction, so it must be idempotent; it is then recorded under the lock.
 *
 * Rows go to the DataSource's TypeORM migrations table (its name, schema and row format, through TypeORM's
 * own MigrationExecutor), so an app that lists PG_QUEUE_MIGRATIONS in its own DataSource and this runner
 * agree on what already ran.
 */
export async function runQueueMigrations(dataSource: DataSource, migrations: MigrationClass[] = PG_QUEUE_MIGRATIONS): Promise<string[]> {
  const logger = new Logger('PgQueue');
  const queryRunner = dataSource.createQueryRunner('master');
  const table = new MigrationsTable(dataSource, queryRunner);
  const applied: string[] = [];
  try {
    await queryRunner.connect();
    await underLock(queryRunner, () => table.createIfMissing());
    const done = await table.names();
    for (const migration of queueMigrations(migrations)) {
      if (done.has(migration.name)) continue;
      const ran =
        migration.instance?.transaction === false
          ? await runOutsideTransaction(queryRunner, table, migration)
          : await underLock(queryRunner, async () => {
              if ((await table.names()).has(migration.name)) return false;
              await up(queryRunner, migration);
              await table.record(migration);
              return true;
            });
      if (ran) applied.push(migration.name);
    }
  } catch (error) {
    logger.error(`queue migrations stopped${applied.length ? ` after applying ${applied.join(', ')}` : ''}: ${String(error)}`);
    throw error;
  } finally {
    await queryRunner.release();
  }
  if (applied.length > 0) logger.log(`applied queue migrations: ${applied.join(', ')}`);
  return applied;
}

/** Runs `work` in a transaction that holds the migration lock; commits, or rolls back and rethrows. */
async function underLock<T>(queryRunner: QueryRunner, work: () => Promise<T>): Promise<T> {
  await queryRunner.startTransaction();
  try {
    await queryRunner.query(SQL.migrationLock);
    const result = await work();
    await queryRunner.commitTransaction();
    return result;
  } catch (error) {
    await queryRunner.rollbackTransaction().catch(() => undefined);
    throw error;
  }
}

async function runOutsideTransaction(queryRunner: QueryRunner, table: MigrationsTable, migration: Migration): Promise<boolean> {
  await up(queryRunner, migration);
  return underLock(queryRunner, async () => {
    if ((await table.names()).has(migration.name)) return false; // another instance recorded it meanwhile
    await table.record(migration);
    return true;
  });
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
