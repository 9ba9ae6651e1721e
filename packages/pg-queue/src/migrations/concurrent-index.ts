import type { QueryRunner } from 'typeorm';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { INDEX_NAME_TAKEN } from '../pg-queue.messages.js';

/**
 * Index builds and drops for migrations declared `transaction = false`: CONCURRENTLY, so writes to
 * background_jobs go on during the build (a plain CREATE INDEX blocks every insert and update until it ends).
 * Outside a transaction (the module's runner, or an app's DataSource with migrationsTransactionMode 'each')
 * they run CONCURRENTLY; inside one (a revert, or a DataSource that wraps everything) they fall back to the
 * plain statements, which are the only ones PostgreSQL accepts there.
 */

/** Creates the index unless a valid one of that name exists; an invalid one (a concurrent build that crashed) is rebuilt. Safe from two instances at once. */
export async function createIndexConcurrently(q: QueryRunner, name: string, definition: string, options: { unique?: boolean } = {}): Promise<void> {
  const kind = options.unique ? 'UNIQUE INDEX' : 'INDEX';
  if (q.isTransactionActive) {
    await q.query(`CREATE ${kind} IF NOT EXISTS ${name} ${definition}`);
    return;
  }
  await withoutLockTimeout(q, () => buildConcurrently(q, kind, name, definition));
}

/**
 * A build or drop CONCURRENTLY waits for the transactions open on the table without blocking anyone: no
 * lock_timeout there (the runner's short one would fail it and leave an invalid index to build again).
 */
async function withoutLockTimeout(q: QueryRunner, work: () => Promise<void>): Promise<void> {
  const [{ lock_timeout: lockTimeout }] = (await q.query(`SHOW lock_timeout`)) as { lock_timeout: string }[];
  await q.query(`SET lock_timeout = 0`);
  try {
    await work();
  } finally {
    await q.query(`SELECT set_config('lock_timeout', $1, false)`, [lockTimeout]);
  }
}

async function buildConcurrently(q: QueryRunner, kind: string, name: string, definition: string): Promise<void> {
  for (let created = false; ; ) {
    const [state] = (await q.query(
      `SELECT i.indisvalid AS valid,
         EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.relid = i.indrelid AND p.datid = (SELECT oid FROM pg_database WHERE datname = current_database())) AS building
       FROM pg_index i WHERE i.indexrelid = to_regclass($1)`,
      [name],
    )) as { valid: boolean; building: boolean }[];
    if (!state) {
      // IF NOT EXISTS skips silently when a table or sequence holds the name: without this check, a loop.
      if (created) throw new PgQueueError(INDEX_NAME_TAKEN(name));
      await q.query(`CREATE ${kind} CONCURRENTLY IF NOT EXISTS ${name} ${definition}`);
      created = true;
    } else if (state.valid) return;
    // Another instance is building it right now: wait for its result rather than drop its work.
    else if (state.building) await new Promise((resolve) => setTimeout(resolve, 200));
    else await q.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
  }
}

export async function dropIndexConcurrently(q: QueryRunner, name: string): Promise<void> {
  if (q.isTransactionActive) await q.query(`DROP INDEX IF EXISTS ${name}`);
  else await withoutLockTimeout(q, () => q.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`));
}

/** The index's definition as PostgreSQL prints it (pg_get_indexdef), or null when there is no such index. */
export async function indexDefinition(q: QueryRunner, name: string): Promise<string | null> {
  const [row] = (await q.query(`SELECT pg_get_indexdef(to_regclass($1)) AS def`, [name])) as { def: string | null }[];
  return row?.def ?? null;
}
