import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexConcurrently, dropIndexConcurrently } from './concurrent-index.js';

/**
 * Limits across instances (globalConcurrency, concurrencyPerKey, rateLimit):
 * - `concurrency_key`: the key a job's per-key limit counts it under; NULL unless enqueue was given one.
 * - `limited`: set by the claim of a queue with a concurrency limit (never by the plain claim), so that the
 *   running jobs the limits count have an index of their own: `(queue_name, concurrency_key) WHERE status =
 *   'processing' AND limited`. An index over every running job would cost each plain job an entry at claim.
 * - The claim index of keyed jobs, `(queue_name, concurrency_key, run_at, id) WHERE status = 'queued' AND
 *   concurrency_key IS NOT NULL`, which the per-key claim walks one key at a time.
 * - `background_queue_starts`: the rate limit's sliding window, one row per claim that started jobs.
 * A plain job satisfies neither index predicate, so it gets no new index entry; the columns are nullable
 * without a default (catalog-only, no table rewrite) and no heartbeat touches them (heartbeats stay HOT).
 */
export class Limits1764560000000 implements MigrationInterface {
  name = 'Limits1764560000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS concurrency_key text, ADD COLUMN IF NOT EXISTS limited boolean`);
    // Outside a transaction two instances may run this at once: IF NOT EXISTS alone can still fail on the
    // catalog's unique index when both create at the same instant; the loser finds the winner's table.
    await q.query(`
      DO $$ BEGIN
        CREATE TABLE IF NOT EXISTS background_queue_starts (
          queue_name text NOT NULL,
          started_at timestamptz NOT NULL,
          n          integer NOT NULL
        );
        CREATE INDEX IF NOT EXISTS background_queue_starts_idx ON background_queue_starts (queue_name, started_at);
      EXCEPTION WHEN unique_violation OR duplicate_table OR duplicate_object THEN NULL;
      END $$`);
    await createIndexConcurrently(q, 'background_jobs_limited_idx', `ON background_jobs (queue_name, concurrency_key) WHERE status = 'processing' AND limited`);
    await createIndexConcurrently(
      q,
      'background_jobs_key_claim_idx',
      `ON background_jobs (queue_name, concurrency_key, run_at, id) WHERE status = 'queued' AND concurrency_key IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await dropIndexConcurrently(q, 'background_jobs_key_claim_idx');
    await dropIndexConcurrently(q, 'background_jobs_limited_idx');
    await q.query(`DROP TABLE IF EXISTS background_queue_starts`);
    await q.query(`ALTER TABLE background_jobs DROP COLUMN IF EXISTS limited, DROP COLUMN IF EXISTS concurrency_key`);
  }
}
