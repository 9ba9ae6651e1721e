import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What a handler and its caller can see of a job (README: Results, Progress, Waiting for a job):
 * - `result`: what the handler returned, as JSON; NULL when it returned nothing (no write for those jobs).
 * - `progress`: the last value a handler gave `job.progress()`, written with the heartbeat or the outcome.
 * - `awaited`: set by `QueueService.waitFor()`; the statements that finish a job NOTIFY only for marked rows,
 *   so a queue nobody waits on sends no notice per job.
 * Nullable columns without a default: catalog-only, no table rewrite, a brief lock. None is indexed, so the
 * heartbeat and outcome updates that write them stay HOT.
 */
export class JobResults1764570000000 implements MigrationInterface {
  name = 'JobResults1764570000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS result jsonb, ADD COLUMN IF NOT EXISTS progress jsonb, ADD COLUMN IF NOT EXISTS awaited boolean`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE background_jobs DROP COLUMN IF EXISTS awaited, DROP COLUMN IF EXISTS progress, DROP COLUMN IF EXISTS result`);
  }
}
