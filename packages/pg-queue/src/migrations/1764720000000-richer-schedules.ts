import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Richer recurring schedules (README: Recurring jobs): on background_schedules only,
 * - `every_ms`: a fixed interval from the last fire instead of a cron expression (`cron` becomes nullable; exactly
 *   one of the two is set, and an interval is at least one second);
 * - `fire_limit` and `fires`: the most fires, and how many the schedule's ticks made (counted by the claim);
 * - `start_at` / `end_at`: no fire before / after (end after start);
 * - `next_fire_at` becomes nullable: NULL is a schedule that ended (its limit reached, or its end passed), which the
 *   due scan (`next_fire_at <= now()`) and its partial index never return.
 * The checks hold for rows written by SQL too. The table is small (one row per schedule): the catalog changes and
 * the checks' scan of its rows take a brief lock of it alone; background_jobs is not touched.
 */
export class RicherSchedules1764720000000 implements MigrationInterface {
  name = 'RicherSchedules1764720000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE background_schedules
        ALTER COLUMN cron DROP NOT NULL,
        ALTER COLUMN next_fire_at DROP NOT NULL,
        ADD COLUMN IF NOT EXISTS every_ms int8,
        ADD COLUMN IF NOT EXISTS fire_limit int8,
        ADD COLUMN IF NOT EXISTS fires int8 NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS start_at timestamptz,
        ADD COLUMN IF NOT EXISTS end_at timestamptz`);
    await q.query(`
      ALTER TABLE background_schedules
        DROP CONSTRAINT IF EXISTS background_schedules_cron_or_every,
        ADD CONSTRAINT background_schedules_cron_or_every CHECK ((cron IS NULL) <> (every_ms IS NULL)),
        DROP CONSTRAINT IF EXISTS background_schedules_every_check,
        ADD CONSTRAINT background_schedules_every_check CHECK (every_ms >= 1000),
        DROP CONSTRAINT IF EXISTS background_schedules_limit_check,
        ADD CONSTRAINT background_schedules_limit_check CHECK (fire_limit >= 1),
        DROP CONSTRAINT IF EXISTS background_schedules_dates_check,
        ADD CONSTRAINT background_schedules_dates_check CHECK (end_at > start_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    // The older schema has neither intervals nor ends: every schedules go (their jobs stay), and an ended
    // schedule is kept paused (resuming it there would fire it again, without its limit or end).
    await q.query(`DELETE FROM background_schedules WHERE cron IS NULL`);
    await q.query(`UPDATE background_schedules SET paused = true, next_fire_at = now(), revision = revision + 1 WHERE next_fire_at IS NULL`);
    await q.query(`
      ALTER TABLE background_schedules
        DROP CONSTRAINT IF EXISTS background_schedules_cron_or_every,
        DROP CONSTRAINT IF EXISTS background_schedules_every_check,
        DROP CONSTRAINT IF EXISTS background_schedules_limit_check,
        DROP CONSTRAINT IF EXISTS background_schedules_dates_check,
        DROP COLUMN IF EXISTS every_ms,
        DROP COLUMN IF EXISTS fire_limit,
        DROP COLUMN IF EXISTS fires,
        DROP COLUMN IF EXISTS start_at,
        DROP COLUMN IF EXISTS end_at,
        ALTER COLUMN cron SET NOT NULL,
        ALTER COLUMN next_fire_at SET NOT NULL`);
  }
}
