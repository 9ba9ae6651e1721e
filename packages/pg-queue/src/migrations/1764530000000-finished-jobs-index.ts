import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexConcurrently, dropIndexConcurrently } from './concurrent-index.js';

/**
 * Finished jobs by status and finish time, so each prune batch reads only rows past retention instead of
 * scanning the table (2M retained rows: a 200+ ms sequential scan per statement even when nothing is due), and
 * stats() can count finished jobs per status through an index. finished_at is set exactly when a job reaches
 * completed, failed or cancelled, so the predicate keeps queued and running jobs out of it. Cost: one more
 * index entry per finished job that is kept (completedRetentionMs 0 deletes the row instead: no cost there).
 */
export class FinishedJobsIndex1764530000000 implements MigrationInterface {
  name = 'FinishedJobsIndex1764530000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await createIndexConcurrently(q, 'background_jobs_finished_idx', `ON background_jobs (status, finished_at) WHERE finished_at IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropIndexConcurrently(q, 'background_jobs_finished_idx');
  }
}
