import type { QueryRunner } from 'typeorm';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { INDEX_STILL_INVALID } from '../pg-queue.messages.js';

/**
 * Builds an index with CREATE INDEX CONCURRENTLY, idempotently, for a migration with `transaction = false`:
 * `definition` is what follows the index name (`ON table (columns) WHERE ...`). A build that crashed, was
 * cancelled or lost a deadlock leaves an INVALID index under the name, which IF NOT EXISTS alone would keep
 * (unused by the planner, yet maintained on every write); such an index is dropped and built again.
 */
export async function createIndexConcurrently(queryRunner: QueryRunner, name: string, definition: string, options: { unique?: boolean } = {}): Promise<void> {
  const create = `CREATE ${options.unique ? 'UNIQUE ' : ''}INDEX CONCURRENTLY IF NOT EXISTS ${name} ${definition}`;
  await queryRunner.query(create);
  if (await isValid(queryRunner, name)) return;
  await queryRunner.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
  await queryRunner.query(create);
  if (!(await isValid(queryRunner, name))) throw new PgQueueError(INDEX_STILL_INVALID(name));
}

async function isValid(queryRunner: QueryRunner, name: string): Promise<boolean> {
  const rows = (await queryRunner.query(`SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass($1)`, [name])) as { valid: boolean }[];
  return rows[0]?.valid === true;
}
