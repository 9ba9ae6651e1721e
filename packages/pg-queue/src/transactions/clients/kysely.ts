import { loadOptionalPeer } from '../../utils/load-optional-peer.js';
import { inSavepoint, type CallerTransaction } from '../caller-transaction.js';

/**
 * A Kysely instance (a Kysely<DB>, or the Transaction<DB> of `db.transaction().execute()`), as far as the queue's
 * type says: any Kysely<DB> fits it. What the queue calls is KyselyApi.
 */
export interface KyselyLike {
  readonly isTransaction: boolean;
  executeQuery(query: never, ...rest: never[]): PromiseLike<unknown>;
}

interface KyselyApi {
  readonly isTransaction: boolean;
  executeQuery(query: unknown): Promise<{ rows: unknown[] }>;
  transaction(): { execute<T>(work: (trx: KyselyApi) => Promise<T>): Promise<T> };
}

export function isKysely(value: object): value is KyselyLike {
  const db = value as Partial<KyselyLike>;
  return typeof db.executeQuery === 'function' && typeof db.isTransaction === 'boolean';
}

type RawQuery = (sql: string, parameters: readonly unknown[]) => { readonly sql: string; readonly parameters: readonly unknown[] };
let rawQuery: Promise<RawQuery> | undefined;

/** Kysely's own CompiledQuery.raw, imported on the first use (kysely is an optional peer). */
function compiled(): Promise<RawQuery> {
  rawQuery ??= loadOptionalPeer('kysely', 'enqueue with a Kysely transaction', '>=0.27', () => import('kysely')).then(
    (kysely) => (sql, parameters) => kysely.CompiledQuery.raw(sql, [...parameters]),
  );
  return rawQuery;
}

/** A Kysely Transaction (the PostgresDialect passes $1..$n through); a Kysely<DB> that is not one autocommits. */
export function kyselyTransaction(kysely: KyselyLike): CallerTransaction {
  const db = kysely as unknown as KyselyApi;
  const tx: CallerTransaction = {
    client: db.isTransaction ? 'a Kysely transaction' : 'a Kysely instance (not in a transaction)',
    query: async <R>(text: string, values: readonly unknown[]) => (await db.executeQuery((await compiled())(text, values))).rows as R[],
    atomically: (work) => (db.isTransaction ? inSavepoint(tx, work) : db.transaction().execute((trx) => work(kyselyTransaction(trx as unknown as KyselyLike)))),
  };
  return tx;
}
