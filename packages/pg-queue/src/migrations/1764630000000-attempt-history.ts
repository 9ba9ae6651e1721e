import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Attempt history (README: "Attempt history"): one row per attempt that did not complete (it failed, or its lease
 * expired), written by the statement that records it, so that a job retried 5 times shows 5 errors, not the last.
 * A job that completes at its first attempt writes none: its own row is its only attempt. Rows of deleted jobs are
 * deleted with them (only for jobs that ever failed: `last_error` set). No foreign key, so that deleting a job pays
 * no lookup here unless it has history. A new table: no lock on background_jobs.
 */
export class AttemptHistory1764630000000 implements MigrationInterface {
  name = 'AttemptHistory1764630000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE IF NOT EXISTS background_job_attempts (
        id bigserial PRIMARY KEY,
        job_id bigint NOT NULL,
        attempt int NOT NULL,
        worker text,
        started_at timestamptz,
        finished_at timestamptz NOT NULL DEFAULT now(),
        outcome text NOT NULL,
        error text
      )`);
    await q.query(`CREATE INDEX IF NOT EXISTS background_job_attempts_job_idx ON background_job_attempts (job_id, id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS background_job_attempts`);
  }
}
