import { Logger } from '@nestjs/common';
import { DataSource, Migration, MigrationExecutor, type QueryRunner } from 'typeorm';
import { checkServer } from '../connection/check-server.js';
import { runQueueMigrations } from '../connection/run-queue-migrations.js';
import { PG_QUEUE_MIGRATIONS } from '../migrations/index.js';
import { DATABASE_SQL } from '../store/database.sql.js';
import { MIGRATION_CHANGED, MIGRATION_DOWN_SUMMARY, NO_MIGRATION_TO_UNDO } from './cli.messages.js';
import { confirm } from './confirm.js';
import type { Connection } from './connection.js';
import { CliError } from './errors.js';
import { print, printJson, printTable } from './output.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';

/** `pg-queue migrate`: up, down one step, status; through TypeORM's migrations table, as the module's runner. */

export interface MigrateOptions {
  migrationsTable?: string;
  json?: boolean;
}

export async function up(connection: Connection, options: MigrateOptions): Promise<void> {
  const dataSource = await connection.dataSource(options.migrationsTable);
  try {
    // The runner logs through Nest's Logger; here the command prints the outcome itself.
    Logger.overrideLogger(false);
    // Refused as at boot: a distributed engine would stop the migrations half-way, with its own error.
    await checkServer((sql) => dataSource.query(sql), new PgQueueLogger('PgQueue'), true);
    const applied = await runQueueMigrations(dataSource);
    print(applied.length === 0 ? 'schema is up to date: no pending queue migration' : `applied ${applied.length} migration(s): ${applied.join(', ')}`);
  } finally {
    await dataSource.destroy();
  }
}

export async function down(connection: Connection, options: MigrateOptions & { yes?: boolean }): Promise<void> {
  const dataSource = await connection.dataSource(options.migrationsTable);
  const runner = dataSource.createQueryRunner('master');
  try {
    await runner.connect();
    const table = new MigrationsTable(dataSource, runner);
    // Asked before the lock is taken (an answer can take a while; booting apps wait for that lock).
    const lastApplied = async () => {
      const applied = (await table.tableExists()) ? await table.names() : new Set<string>();
      return queueMigrations().filter((m) => applied.has(m.name)).at(-1);
    };
    const asked = await lastApplied();
    if (!asked) throw new CliError(NO_MIGRATION_TO_UNDO());
    if (!options.yes) await confirm(MIGRATION_DOWN_SUMMARY(asked.name), { dryRun: false });
    // A session lock (the direct session is this runner's): the last migrations drop indexes CONCURRENTLY,
    // which cannot run in a transaction.
    await runner.query(DATABASE_SQL.migrationSessionTimeoutsOff);
    while (!((await runner.query(DATABASE_SQL.migrationSessionTryLock)) as { held: boolean }[])[0].held) await new Promise((r) => setTimeout(r, 100));
    try {
      const last = await lastApplied();
      if (!last) throw new CliError(NO_MIGRATION_TO_UNDO());
      if (last.name !== asked.name) throw new CliError(MIGRATION_CHANGED(asked.name, last.name));
      const inTransaction = last.instance!.transaction !== false;
      if (inTransaction) await runner.startTransaction();
      try {
        await last.instance!.down(runner);
        await table.remove(last);
        if (inTransaction) await runner.commitTransaction();
      } catch (error) {
        if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
        throw error;
      }
      print(`reverted ${last.name}`);
    } finally {
      await runner.query(DATABASE_SQL.migrationSessionUnlock).catch(() => undefined);
    }
  } finally {
    await runner.release();
    await dataSource.destroy();
  }
}

export async function status(connection: Connection, options: MigrateOptions): Promise<void> {
  const { rows, pending } = await migrationStatus(connection, options.migrationsTable);
  if (options.json) return printJson(rows);
  printTable(['migration', 'state'], rows.map((r) => [r.name, r.applied ? 'applied' : 'pending']));
  print(pending === 0 ? 'schema is up to date' : `${pending} pending: run \`pg-queue migrate\``);
}

/** Each queue migration, applied or not (read only: a missing migrations table means none applied). */
export async function migrationStatus(connection: Connection, migrationsTable?: string): Promise<{ rows: { name: string; applied: boolean }[]; pending: number }> {
  const dataSource = await connection.dataSource(migrationsTable);
  const runner = dataSource.createQueryRunner('master');
  try {
    await runner.connect();
    const table = new MigrationsTable(dataSource, runner);
    const applied = (await table.tableExists()) ? await table.names() : new Set<string>();
    const rows = queueMigrations().map((m) => ({ name: m.name, applied: applied.has(m.name) }));
    return { rows, pending: rows.filter((r) => !r.applied).length };
  } finally {
    await runner.release();
    await dataSource.destroy();
  }
}

function queueMigrations(): Migration[] {
  return PG_QUEUE_MIGRATIONS.map((M) => {
    const instance = new M();
    return new Migration(undefined, Number((instance.name ?? M.name).slice(-13)), instance.name ?? M.name, instance);
  }).sort((a, b) => a.timestamp - b.timestamp);
}

/** TypeORM's own bookkeeping of its migrations table (name, schema, row format), as the module's runner uses it. */
class MigrationsTable extends MigrationExecutor {
  constructor(
    private readonly source: DataSource,
    private readonly runner: QueryRunner,
  ) {
    super(source, runner);
  }

  tableExists(): Promise<boolean> {
    const options = this.source.options as { migrationsTableName?: string; schema?: string };
    const name = options.migrationsTableName ?? 'migrations';
    return this.runner.hasTable(options.schema ? `${options.schema}.${name}` : name);
  }

  async names(): Promise<Set<string>> {
    return new Set((await this.loadExecutedMigrations(this.runner)).map((m) => m.name));
  }

  remove(migration: Migration): Promise<void> {
    return this.deleteExecutedMigration(this.runner, migration);
  }
}
