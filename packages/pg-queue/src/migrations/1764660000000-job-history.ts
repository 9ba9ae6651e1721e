import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Partitioned history (README: "Long retention: partitioned history"). Finished jobs may leave background_jobs for
 * background_jobs_history, partitioned by status (completed apart from failed and cancelled, which keep their own
 * retention) and then by finish time, so that retention drops whole partitions instead of deleting rows. The
 * partitions themselves are made by the queue's maintenance as it moves rows (history.store.ts), never here.
 *
 * background_jobs_all is what every read of a job by id or of finished jobs goes through: the two tables as one.
 * A row is moved by one statement (DELETE ... RETURNING, then INSERT), so a read sees it in one table or the other,
 * never both and never neither.
 *
 * The history table has background_jobs' columns (LIKE, at the time of this migration) and no defaults: rows are
 * only ever copied into it. A later migration that adds a column adds it to both tables and makes the view again.
 * Only new tables and a view: no lock that stops enqueues or claims. Nothing moves until `maintenance.history` is
 * set (opt-in).
 */
export class JobHistory1764660000000 implements MigrationInterface {
  name = 'JobHistory1764660000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE IF NOT EXISTS background_jobs_history (LIKE background_jobs) PARTITION BY LIST (status)`);
    await q.query(`
      CREATE TABLE IF NOT EXISTS background_jobs_history_completed PARTITION OF background_jobs_history
      FOR VALUES IN ('completed') PARTITION BY RANGE (finished_at)`);
    await q.query(`
      CREATE TABLE IF NOT EXISTS background_jobs_history_failed PARTITION OF background_jobs_history
      FOR VALUES IN ('failed', 'cancelled') PARTITION BY RANGE (finished_at)`);
    // get(id), waits and the lists by id; the finished-jobs counts and chart by time; a flow's jobs.
    await q.query(`CREATE INDEX IF NOT EXISTS background_jobs_history_id_idx ON background_jobs_history (id)`);
    // (status, finished_at): the failed partitions hold cancelled jobs too, and 'the newest cancelled' must not read the failed ones.
    await q.query(`CREATE INDEX IF NOT EXISTS background_jobs_history_finished_idx ON background_jobs_history (status, finished_at)`);
    await q.query(`CREATE INDEX IF NOT EXISTS background_jobs_history_flow_idx ON background_jobs_history (flow_id) WHERE flow_id IS NOT NULL`);
    await q.query(`CREATE OR REPLACE VIEW background_jobs_all AS SELECT * FROM background_jobs UNION ALL SELECT * FROM background_jobs_history`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP VIEW IF EXISTS background_jobs_all`);
    await q.query(`DROP TABLE IF EXISTS background_jobs_history`);
  }
}
