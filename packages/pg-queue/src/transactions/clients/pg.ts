import type { ClientBase } from 'pg';
import { inOpenSavepoint, type CallerTransaction } from '../caller-transaction.js';

/** A pg Client or PoolClient (a Pool has no escapeIdentifier: see isPgPool). */
export function isPgClient(value: object): value is ClientBase {
  const client = value as Partial<ClientBase>;
  return typeof client.query === 'function' && typeof client.escapeIdentifier === 'function';
}

/** A pg Pool runs each query on whichever connection is free, so it cannot hold a transaction. */
export function isPgPool(value: object): boolean {
  const pool = value as { query?: unknown; connect?: unknown; totalCount?: unknown };
  return typeof pool.query === 'function' && typeof pool.connect === 'function' && typeof pool.totalCount === 'number';
}

/**
 * A pg client on which the caller ran BEGIN. pg cannot say whether a transaction is open, so `atomically` asks
 * PostgreSQL: a SAVEPOINT outside a transaction block fails (25P01, changing nothing), and the call then opens one
 * of its own on the same connection.
 */
export function pgTransaction(client: ClientBase): CallerTransaction {
  const tx: CallerTransaction = {
    client: 'a pg client',
    query: async <R>(text: string, values: readonly unknown[]) => (await client.query({ text, values: values as unknown[] })).rows as R[],
    atomically: async (work) => {
      try {
        await client.query('SAVEPOINT pg_queue');
      } catch (error) {
        if ((error as { code?: unknown }).code !== '25P01') throw error;
        return ownTransaction(client, tx, work);
      }
      return inOpenSavepoint(tx, work);
    },
  };
  return tx;
}

async function ownTransaction<T>(client: ClientBase, tx: CallerTransaction, work: (tx: CallerTransaction) => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    const result = await work(tx);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
