import type { QueryRunner } from 'typeorm';

/**
 * For a migration declared `transaction = false`: runs a few statements that must take effect together (a trigger
 * swapped for another) in one short transaction of their own. Inside a transaction already (a DataSource that wraps
 * every migration), they simply run in it.
 */
export async function inOwnTransaction(q: QueryRunner, work: () => Promise<void>): Promise<void> {
  if (q.isTransactionActive) return work();
  await q.startTransaction();
  try {
    await work();
    await q.commitTransaction();
  } catch (error) {
    await q.rollbackTransaction().catch(() => undefined);
    throw error;
  }
}
