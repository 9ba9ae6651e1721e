import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Durable steps (docs/guides/durable-steps.md): `steps` holds what `job.step()` and `job.sleep()` recorded, as a
 * JSON array of { name, result?, attempt, at, until? } in the order they were recorded. NULL for a job that never
 * recorded one: a nullable column without a default is catalog-only (no table rewrite, a brief lock) and costs a
 * row that never uses it one bit of its null bitmap. Not indexed, so the update that appends a step stays HOT.
 */
export class DurableSteps1764620000000 implements MigrationInterface {
  name = 'DurableSteps1764620000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS steps jsonb`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE background_jobs DROP COLUMN IF EXISTS steps`);
  }
}
