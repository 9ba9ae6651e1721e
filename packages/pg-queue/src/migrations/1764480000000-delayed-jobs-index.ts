import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexConcurrently, dropIndexConcurrently } from './concurrent-index.js';

/**
 * Replaces the seed's run_at index (queue_name, run_at) WHERE status = 'queued' (an adopted table's, or the
 * background_jobs_run_at_idx the released first migration built) with one over delayed and put-back jobs only
 * (run_at later than created_at). Two reasons, both measured:
 * - The claim could use the old index: its predicate was implied by the claim's WHERE. Right after a bulk
 *   enqueue, before autovacuum has analyzed the table, the planner estimated one due row and chose it over the
 *   claim index, then sorted every due job per claim: 100k queued jobs drained at 5k jobs/s instead of 20k
 *   (a claim of 500 took 47-120 ms instead of 7). No claim can imply `run_at > created_at`, so the claim
 *   index is the only one left for it, whatever the statistics say.
 * - A job enqueued to run now (run_at = created_at, the common case) no longer gets an entry at all: one
 *   index insert fewer per job. The next-delayed-job lookup states the same predicate, so it still probes
 *   the index once: a job whose run_at is in the future always has run_at > created_at.
 * Built concurrently, outside a transaction (writes go on during the build); the new index first, so the
 * next-delayed-job lookup always has one.
 */
export class DelayedJobsIndex1764480000000 implements MigrationInterface {
  name = 'DelayedJobsIndex1764480000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await createIndexConcurrently(q, 'background_jobs_delayed_idx', `ON background_jobs (queue_name, run_at) WHERE status = 'queued' AND run_at > created_at`);
    // The seed's index, under our name or the one an adopted table gave it.
    const seedIndexes = (await q.query(`
      SELECT indexname FROM pg_indexes
      WHERE tablename = 'background_jobs' AND schemaname = current_schema()
        AND indexdef LIKE '%USING btree (queue_name, run_at) WHERE (status = ''queued''::background_job_status)'`)) as { indexname: string }[];
    for (const { indexname } of seedIndexes) await dropIndexConcurrently(q, q.connection.driver.escape(indexname));
  }

  async down(q: QueryRunner): Promise<void> {
    await createIndexConcurrently(q, 'background_jobs_run_at_idx', `ON background_jobs (queue_name, run_at) WHERE status = 'queued'`);
    await dropIndexConcurrently(q, 'background_jobs_delayed_idx');
  }
}
