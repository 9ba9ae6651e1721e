/**
 * A transaction of the caller's, whatever client opened it (clients/: TypeORM, pg, Prisma, Kysely, Drizzle,
 * MikroORM). An enqueue runs its statements on it, so the jobs commit or roll back with the caller's own writes,
 * and the jobs table's NOTIFY trigger wakes the workers at that commit, not before.
 */
export interface CallerTransaction {
  /** What the caller passed, in words, for messages ("a Prisma transaction client"). */
  readonly client: string;
  /** Runs one statement with $1..$n parameters; rows as pg returns them (int8 as text). */
  query<R>(text: string, values: readonly unknown[]): Promise<R[]>;
  /**
   * Runs `work` all-or-nothing: inside a savepoint when the caller's transaction is open (a refused statement then
   * leaves that transaction usable, with nothing of the call in it); else in a transaction of its own, opened
   * through the client's own API.
   */
  atomically<T>(work: (tx: CallerTransaction) => Promise<T>): Promise<T>;
}

/** `work` inside a savepoint of `tx`'s open transaction: rolled back to it when `work` throws. */
export async function inSavepoint<T>(tx: CallerTransaction, work: (tx: CallerTransaction) => Promise<T>): Promise<T> {
  await tx.query('SAVEPOINT pg_queue', []);
  return inOpenSavepoint(tx, work);
}

/** inSavepoint once the savepoint is set. */
export async function inOpenSavepoint<T>(tx: CallerTransaction, work: (tx: CallerTransaction) => Promise<T>): Promise<T> {
  let result: T;
  try {
    result = await work(tx);
  } catch (error) {
    // When even this fails the caller's transaction is broken, and its own rollback is what remains: the error
    // that matters is the statement's.
    await tx.query('ROLLBACK TO SAVEPOINT pg_queue', []).then(() => tx.query('RELEASE SAVEPOINT pg_queue', []), () => undefined);
    throw error;
  }
  await tx.query('RELEASE SAVEPOINT pg_queue', []);
  return result;
}

/**
 * int8 and numeric come back from some clients (Prisma) as bigint; the queue's code reads them as pg returns them,
 * as text.
 */
export function bigintsAsText<R>(rows: readonly Record<string, unknown>[]): R[] {
  for (const row of rows) {
    for (const key in row) if (typeof row[key] === 'bigint') row[key] = String(row[key]);
  }
  return rows as R[];
}
