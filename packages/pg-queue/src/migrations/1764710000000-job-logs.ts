import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Job logs (README: "Job logs"): `logs` holds the lines handlers wrote with `job.log()`, as a JSON object
 * { lines: [{ attempt, at, line }], total, claim, seq } (store/shared.sql.ts, appendLogs, writes it; the newest
 * jobLogs.maxLines lines are kept, `total` counts every line ever logged, `claim` and `seq` make a write sent twice land
 * once). NULL for a job that never logged: a nullable column without a default is catalog-only (no table rewrite, a
 * brief lock) and costs a row that never uses it one bit of its null bitmap. Not indexed, so the heartbeat and outcome
 * updates that write it stay HOT.
 *
 * The lines live in the job's row so that they go wherever the row goes: moved into history, brought back by a
 * retry, deleted by the pruner, a bulk delete or a partition's drop, with nothing to keep in step. So the column is
 * added to background_jobs_history too, and the view that reads both is made again with it (JobHistory1764660000000).
 * The view is locked first (which locks both tables, in that order): a read of a job through the view locks the view
 * before the tables, so taking them the other way round could deadlock with it.
 */
export class JobLogs1764710000000 implements MigrationInterface {
  name = 'JobLogs1764710000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`LOCK TABLE background_jobs_all IN ACCESS EXCLUSIVE MODE`);
    await q.query(`ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS logs jsonb`);
    await q.query(`ALTER TABLE background_jobs_history ADD COLUMN IF NOT EXISTS logs jsonb`);
    await q.query(`CREATE OR REPLACE VIEW background_jobs_all AS SELECT * FROM background_jobs UNION ALL SELECT * FROM background_jobs_history`);
  }

  async down(q: QueryRunner): Promise<void> {
    // A view cannot lose a column in place: dropped, and made again once the tables have lost it.
    await q.query(`DROP VIEW IF EXISTS background_jobs_all`);
    await q.query(`ALTER TABLE background_jobs_history DROP COLUMN IF EXISTS logs`);
    await q.query(`ALTER TABLE background_jobs DROP COLUMN IF EXISTS logs`);
    await q.query(`CREATE VIEW background_jobs_all AS SELECT * FROM background_jobs UNION ALL SELECT * FROM background_jobs_history`);
  }
}
