import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Recurring jobs: one row per schedule. A fire is claimed by a compare-and-set on next_fire_at (and revision)
 * in the transaction that inserts its job, so each fire time is enqueued once however many instances tick.
 * A new table: created in one transaction, nothing on background_jobs changes.
 */
export class CreateBackgroundSchedules1764550000000 implements MigrationInterface {
  name = 'CreateBackgroundSchedules1764550000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE IF NOT EXISTS background_schedules (
        name             text PRIMARY KEY,
        queue_name       text NOT NULL,
        cron             text NOT NULL,
        time_zone        text NOT NULL DEFAULT 'UTC',
        payload          jsonb NOT NULL DEFAULT '{}',
        missed_fires     text NOT NULL DEFAULT 'skip' CHECK (missed_fires IN ('skip', 'latest', 'window')),
        missed_window_ms int8,
        priority         int NOT NULL DEFAULT 0,
        max_attempts     int,
        paused           boolean NOT NULL DEFAULT false,
        next_fire_at     timestamptz NOT NULL,
        last_fire_at     timestamptz,
        source           text NOT NULL CHECK (source IN ('code', 'runtime')),
        -- Bumped on every change of the definition: a fire planned from an older definition is refused.
        revision         int8 NOT NULL DEFAULT 1,
        -- Code schedules: last time a running instance declared it (at boot, then every minute).
        declared_at      timestamptz,
        created_at       timestamptz NOT NULL DEFAULT now(),
        updated_at       timestamptz NOT NULL DEFAULT now()
      )`);
    // The tick's one query: schedules due now, and the next fire time after them.
    await q.query(`CREATE INDEX IF NOT EXISTS background_schedules_due_idx ON background_schedules (next_fire_at) WHERE NOT paused`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS background_schedules`);
  }
}
