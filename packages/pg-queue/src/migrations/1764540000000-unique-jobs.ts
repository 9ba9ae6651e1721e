import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexConcurrently, dropIndexConcurrently } from './concurrent-index.js';

/**
 * Unique jobs. `unique_key` is NULL for a plain job, which then has no entry in the partial unique index: a
 * job without a key costs no extra index write. A job with a key holds it while queued or running; completed,
 * failed and cancelled jobs free it. The index, not a read-then-write check, makes two concurrent enqueues of
 * one key make one job.
 *
 * background_job_keys holds the `uniqueForMs` windows: one row per queue and key, taken by the enqueue that
 * inserts a job and held until `held_until`. Kept apart from the job rows so the window outlives a job the
 * pruner deleted; the pruner deletes expired rows (through the held_until index).
 *
 * ADD COLUMN of a nullable column without a default is a catalog-only change; the index is built
 * CONCURRENTLY (the column is new, so no duplicates can make the build fail).
 */
export class UniqueJobs1764540000000 implements MigrationInterface {
  name = 'UniqueJobs1764540000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS unique_key text`);
    // transaction = false: instances booting at once run this side by side, and IF NOT EXISTS alone still lets
    // two CREATEs collide in the catalog (unique_violation); the loser finds the winner's table and goes on.
    await q.query(`
      DO $$ BEGIN
        CREATE TABLE IF NOT EXISTS background_job_keys (
          queue_name text NOT NULL,
          unique_key text NOT NULL,
          held_until timestamptz NOT NULL,
          job_id     int8 NOT NULL,
          PRIMARY KEY (queue_name, unique_key)
        );
      EXCEPTION WHEN unique_violation OR duplicate_table THEN NULL;
      END $$`);
    await q.query(`
      DO $$ BEGIN
        CREATE INDEX IF NOT EXISTS background_job_keys_held_until_idx ON background_job_keys (held_until);
      EXCEPTION WHEN unique_violation OR duplicate_table THEN NULL;
      END $$`);
    await createIndexConcurrently(
      q,
      'background_jobs_unique_key_idx',
      `ON background_jobs (queue_name, unique_key) WHERE unique_key IS NOT NULL AND status IN ('queued', 'processing')`,
      { unique: true },
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await dropIndexConcurrently(q, 'background_jobs_unique_key_idx');
    await q.query(`DROP TABLE IF EXISTS background_job_keys`);
    await q.query(`ALTER TABLE background_jobs DROP COLUMN IF EXISTS unique_key`);
  }
}
