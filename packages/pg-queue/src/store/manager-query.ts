import type { EntityManager } from 'typeorm';

/**
 * Runs a statement on the caller's EntityManager, so that it commits or rolls back with the caller's own
 * writes. Structured results keep INSERT ... RETURNING rows the same whatever TypeORM does with raw results.
 */
export async function managerQuery<R = { id: string }>(manager: EntityManager, text: string, values: unknown[]): Promise<R[]> {
  if (manager.queryRunner) {
    const result = await manager.queryRunner.query(text, values, true);
    return result.records as R[];
  }
  return (await manager.query(text, values)) as R[];
}
