import { loadOptionalPeer } from '../../utils/load-optional-peer.js';
import { inSavepoint, type CallerTransaction } from '../caller-transaction.js';

/**
 * A Drizzle database or transaction (drizzle-orm's PgDatabase, PgTransaction), as far as the queue's type says: any
 * of them fits it. What the queue calls is DrizzleApi.
 */
export interface DrizzleLike {
  execute(query: never, ...rest: never[]): PromiseLike<unknown>;
}

interface DrizzleApi {
  execute(query: unknown): PromiseLike<unknown>;
  transaction<T>(work: (tx: DrizzleApi) => Promise<T>): Promise<T>;
}

/** Drizzle names each class with a symbol-keyed static (`is()` walks the same chain); the kinds of `value`'s classes. */
function drizzleKinds(value: object): string[] {
  const kinds: string[] = [];
  const key = Symbol.for('drizzle:entityKind');
  for (let c: unknown = value.constructor; typeof c === 'function'; c = Object.getPrototypeOf(c)) {
    const kind = (c as unknown as Record<symbol, unknown>)[key];
    if (typeof kind === 'string' && !kinds.includes(kind)) kinds.push(kind);
  }
  return kinds;
}

export function isDrizzle(value: object): value is DrizzleLike {
  return drizzleKinds(value).includes('PgDatabase');
}

type DrizzleSql = typeof import('drizzle-orm').sql;
let drizzleSql: Promise<DrizzleSql> | undefined;

/**
 * The statement as drizzle's `sql` chunks: the text between parameters raw, each $n a parameter (drizzle numbers
 * them itself, in order, so a $n used twice is sent twice).
 */
async function toDrizzleSql(text: string, values: readonly unknown[]): Promise<unknown> {
  drizzleSql ??= loadOptionalPeer('drizzle-orm', 'enqueue with a Drizzle transaction', '>=0.30', () => import('drizzle-orm')).then((m) => m.sql);
  const sql = await drizzleSql;
  const parts = text.split(/\$(\d+)/);
  const chunks = parts.map((part, i) => (i % 2 === 0 ? sql.raw(part) : sql.param(values[Number(part) - 1])));
  return sql.join(chunks);
}

/** A Drizzle transaction (`db.transaction(async (tx) => ...)`); the database object itself autocommits. */
export function drizzleTransaction(drizzle: DrizzleLike): CallerTransaction {
  const db = drizzle as unknown as DrizzleApi;
  const inTransaction = drizzleKinds(db).includes('PgTransaction');
  const tx: CallerTransaction = {
    client: inTransaction ? 'a Drizzle transaction' : 'a Drizzle database (not in a transaction)',
    query: async <R>(text: string, values: readonly unknown[]) => {
      let result: { rows?: unknown[] } | unknown[];
      try {
        result = (await db.execute(await toDrizzleSql(text, values))) as { rows?: unknown[] } | unknown[];
      } catch (error) {
        // DrizzleQueryError wraps the driver's error (message: the whole statement); the queue reads the driver's.
        const cause = (error as { cause?: { code?: unknown } } | null)?.cause;
        throw typeof cause?.code === 'string' ? cause : error;
      }
      // node-postgres answers with pg's result, postgres.js with the rows themselves.
      return (Array.isArray(result) ? result : (result.rows ?? [])) as R[];
    },
    atomically: (work) => (inTransaction ? inSavepoint(tx, work) : db.transaction((inner) => work(drizzleTransaction(inner as unknown as DrizzleLike)))),
  };
  return tx;
}
