import type { ClientBase } from 'pg';
import type { EntityManager } from 'typeorm';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { NOT_A_TRANSACTION, POOL_IS_NOT_A_TRANSACTION } from '../pg-queue.messages.js';
import type { CallerTransaction } from './caller-transaction.js';
import { drizzleTransaction, isDrizzle, type DrizzleLike } from './clients/drizzle.js';
import { isKysely, kyselyTransaction, type KyselyLike } from './clients/kysely.js';
import { isMikroOrmEntityManager, mikroOrmTransaction, type MikroOrmEntityManagerLike } from './clients/mikro-orm.js';
import { isPgClient, isPgPool, pgTransaction } from './clients/pg.js';
import { isPrismaClient, prismaTransaction, type PrismaClientLike } from './clients/prisma.js';
import { isTypeOrmManager, typeOrmTransaction } from './clients/typeorm.js';

/**
 * The transaction an enqueue joins (the `manager` option): a TypeORM EntityManager, a pg Client or PoolClient on
 * which BEGIN ran, the client of a Prisma interactive transaction, a Kysely Transaction, a Drizzle transaction, or a
 * MikroORM EntityManager. The queue recognises each by its shape and loads nothing of the others; none of them is a
 * dependency (docs/guides/transactional-enqueue.md).
 */
export type TransactionClient = EntityManager | ClientBase | PrismaClientLike | KyselyLike | DrizzleLike | MikroOrmEntityManagerLike;

/**
 * The caller's transaction for what it passed. TypeORM's and Drizzle's are told by their class markers, which
 * no other client has, so they go first; a pg client last, since other clients also have a `query` method.
 */
export function callerTransaction(client: TransactionClient, where: string): CallerTransaction {
  if (client === null || typeof client !== 'object') throw new PgQueueError(NOT_A_TRANSACTION(where, client));
  if (isTypeOrmManager(client)) return typeOrmTransaction(client);
  if (isDrizzle(client)) return drizzleTransaction(client);
  if (isMikroOrmEntityManager(client)) return mikroOrmTransaction(client);
  if (isKysely(client)) return kyselyTransaction(client);
  if (isPrismaClient(client)) return prismaTransaction(client);
  if (isPgPool(client)) throw new PgQueueError(POOL_IS_NOT_A_TRANSACTION(where));
  if (isPgClient(client)) return pgTransaction(client);
  throw new PgQueueError(NOT_A_TRANSACTION(where, client));
}
