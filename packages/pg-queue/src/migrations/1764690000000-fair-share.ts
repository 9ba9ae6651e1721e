import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Fair share across keys (the `fairness` option; docs/guides/fair-share.md):
 * - `background_queue_weights`: weights stored at runtime (QueueService.setFairnessWeights, `pg-queue weights`), one
 *   row per queue and key, read by every fair claim in every process, so a change holds from the next claim on.
 * - `background_fair_passes`: each key's pass (stride scheduling): the virtual time its next job stands at, advanced by
 *   1 / weight for every job the fair claim gives it. The claim gives slots to the lowest passes.
 * - `background_queues.fair_clock`: the queue's virtual time (the pass of the last job a fair claim gave out); a key
 *   that comes back after a pause in its work starts from it, so that an idle key banks no credit.
 * Written only by fair claims, under the queue's advisory lock. Primary keys are the lookups a claim makes per key.
 */
export class FairShare1764690000000 implements MigrationInterface {
  name = 'FairShare1764690000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE IF NOT EXISTS background_queue_weights (
        queue_name text NOT NULL,
        key        text NOT NULL,
        weight     integer NOT NULL CHECK (weight BETWEEN 1 AND 1000),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (queue_name, key)
      )`);
    await q.query(`
      CREATE TABLE IF NOT EXISTS background_fair_passes (
        queue_name text NOT NULL,
        key        text NOT NULL,
        pass       float8 NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (queue_name, key)
      )`);
    await q.query(`ALTER TABLE background_queues ADD COLUMN IF NOT EXISTS fair_clock float8`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE background_queues DROP COLUMN IF EXISTS fair_clock`);
    await q.query(`DROP TABLE IF EXISTS background_fair_passes`);
    await q.query(`DROP TABLE IF EXISTS background_queue_weights`);
  }
}
