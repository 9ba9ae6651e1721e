import type { EntityManager } from 'typeorm';
import { managerQuery } from '../../store/manager-query.js';
import { inSavepoint, type CallerTransaction } from '../caller-transaction.js';

/** TypeORM marks its classes with a symbol of their name (InstanceChecker), which holds across copies of the package. */
export function isTypeOrmManager(value: object): value is EntityManager {
  return (value as { '@instanceof'?: unknown })['@instanceof'] === Symbol.for('EntityManager');
}

/**
 * A TypeORM EntityManager: the one `dataSource.transaction()` hands its callback (or a QueryRunner's), in that
 * transaction; the DataSource's own manager autocommits each statement on any pooled connection.
 */
export function typeOrmTransaction(manager: EntityManager): CallerTransaction {
  const tx: CallerTransaction = {
    client: 'a TypeORM EntityManager',
    query: (text, values) => managerQuery(manager, text, values as unknown[]),
    atomically: (work) =>
      manager.queryRunner?.isTransactionActive ? inSavepoint(tx, work) : manager.transaction((inner) => work(typeOrmTransaction(inner))),
  };
  return tx;
}
