import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Fair share weights stored at runtime (QueueService.setFairnessWeights, `pg-queue weights`): one row per queue and
 * key, read by every fair claim (claimFairJobs) in every process, so a change holds from the next claim on, without a
 * restart or a message. A key without a row weighs what the queue's `fairness` option says. Its primary key is the
 * lookup a claim makes per key of its window.
 */
export class FairnessWeights1764690000000 implements MigrationInterface {
  name = 'FairnessWeights1764690000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE IF NOT EXISTS background_queue_weights (
        queue_name text NOT NULL,
        key        text NOT NULL,
        weight     integer NOT NULL CHECK (weight BETWEEN 1 AND 1000),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (queue_name, key)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS background_queue_weights`);
  }
}
