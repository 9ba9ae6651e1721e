import { inSavepoint, type CallerTransaction } from '../caller-transaction.js';

/**
 * A MikroORM 6 EntityManager (@mikro-orm/postgresql, whose connection is Knex's), as far as the queue's type says:
 * any EntityManager fits it. What the queue calls is MikroOrmApi.
 */
export interface MikroOrmEntityManagerLike {
  getTransactionContext(...args: never[]): unknown;
  isInTransaction(): boolean;
}

interface MikroOrmApi {
  getConnection(): { getKnex(): KnexLike };
  getTransactionContext(): unknown;
  isInTransaction(): boolean;
  transactional<T>(work: (em: MikroOrmApi) => Promise<T>): Promise<T>;
}

interface KnexLike {
  raw(sql: string, bindings: unknown[]): { transacting(trx: unknown): unknown } & PromiseLike<{ rows: unknown[] }>;
}

export function isMikroOrmEntityManager(value: object): value is MikroOrmEntityManagerLike {
  const em = value as Partial<MikroOrmApi>;
  return typeof em.getTransactionContext === 'function' && typeof em.getConnection === 'function' && typeof em.isInTransaction === 'function';
}

/**
 * Knex's raw statements take `?` placeholders, one value each in order, and read a literal `?` as `\?`: each $n
 * becomes a `?` with its value (a $n used twice is bound twice). Knex binds them as real parameters, not literals.
 */
export function toKnexBindings(text: string, values: readonly unknown[]): { sql: string; bindings: unknown[] } {
  const bindings: unknown[] = [];
  const sql = text.replace(/\?/g, '\\?').replace(/\$(\d+)/g, (_, n: string) => {
    bindings.push(values[Number(n) - 1]);
    return '?';
  });
  return { sql, bindings };
}

/**
 * The EntityManager of a MikroORM transaction (`em.transactional(async (em) => ...)`, or one where begin() ran): the
 * statements go to its transaction's connection through Knex. Outside a transaction each autocommits.
 */
export function mikroOrmTransaction(entityManager: MikroOrmEntityManagerLike): CallerTransaction {
  const em = entityManager as unknown as MikroOrmApi;
  const tx: CallerTransaction = {
    client: em.isInTransaction() ? 'a MikroORM EntityManager in a transaction' : 'a MikroORM EntityManager (not in a transaction)',
    query: async <R>(text: string, values: readonly unknown[]) => {
      const { sql, bindings } = toKnexBindings(text, values);
      const statement = em.getConnection().getKnex().raw(sql, bindings);
      const context = em.getTransactionContext();
      if (context) statement.transacting(context);
      return (await statement).rows as R[];
    },
    atomically: (work) => (em.isInTransaction() ? inSavepoint(tx, work) : em.transactional((inner) => work(mikroOrmTransaction(inner as unknown as MikroOrmEntityManagerLike)))),
  };
  return tx;
}
