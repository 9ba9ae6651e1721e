import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The instances registry (README: "Instances"): one row per process that runs workers, written by that process every
 * heartbeatMs (id, host, pid, its queues with their concurrency and running jobs) and deleted when it stops. A
 * row whose expires_at has passed belongs to a process that died or froze; the sweeper deletes such rows an hour
 * later. A new table: no lock on background_jobs.
 */
export class Instances1764650000000 implements MigrationInterface {
  name = 'Instances1764650000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE IF NOT EXISTS background_instances (
        id           text PRIMARY KEY,
        host         text NOT NULL,
        pid          int NOT NULL,
        queues       jsonb NOT NULL,
        started_at   timestamptz NOT NULL DEFAULT now(),
        last_seen_at timestamptz NOT NULL DEFAULT now(),
        expires_at   timestamptz NOT NULL
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS background_instances`);
  }
}
