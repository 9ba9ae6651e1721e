import { bigintsAsText, inSavepoint, type CallerTransaction } from '../caller-transaction.js';

/** What the queue uses of a Prisma client: raw statements ($queryRawUnsafe takes PostgreSQL's $1..$n). */
export interface PrismaClientLike {
  $queryRawUnsafe(query: string, ...values: unknown[]): PromiseLike<unknown>;
}

export function isPrismaClient(value: object): value is PrismaClientLike {
  return typeof (value as Partial<PrismaClientLike>).$queryRawUnsafe === 'function';
}

/**
 * The client Prisma hands an interactive transaction's callback (`prisma.$transaction(async (tx) => ...)`): it is
 * the only Prisma client without `$transaction`. A full PrismaClient autocommits each statement, so a call that
 * needs several opens a transaction of its own through it.
 */
export function prismaTransaction(client: PrismaClientLike): CallerTransaction {
  const open = client as PrismaClientLike & { $transaction?: <T>(work: (tx: PrismaClientLike) => Promise<T>) => Promise<T> };
  const tx: CallerTransaction = {
    client: open.$transaction ? 'a PrismaClient (not in a transaction)' : 'a Prisma transaction client',
    query: async <R>(text: string, values: readonly unknown[]) => {
      try {
        return bigintsAsText<R>((await client.$queryRawUnsafe(text, ...values)) as Record<string, unknown>[]);
      } catch (error) {
        throw postgresErrorOf(error);
      }
    },
    atomically: (work) => (open.$transaction ? open.$transaction((inner) => work(prismaTransaction(inner))) : inSavepoint(tx, work)),
  };
  return tx;
}

/**
 * Prisma reports a failed raw statement as P2010 with PostgreSQL's SQLSTATE inside; the queue reads errors as pg
 * raises them (a key conflict by its 23505), so the SQLSTATE and message come back out, with Prisma's error as the cause.
 */
function postgresErrorOf(error: unknown): unknown {
  const cause = (error as { meta?: { driverAdapterError?: { cause?: { originalCode?: unknown; originalMessage?: unknown } } } } | null)?.meta?.driverAdapterError?.cause;
  if (typeof cause?.originalCode !== 'string') return error;
  return Object.assign(new Error(String(cause.originalMessage ?? error), { cause: error }), { code: cause.originalCode });
}
