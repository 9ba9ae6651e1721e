import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The seed's background_jobs table, enum, partial index, NOTIFY trigger and autovacuum settings, plus
 * what the features need: priority, a lease (owner + expiry, fenced by attempts), finished_at for
 * retention, and the claim index.
 *
 * It also adopts an existing seed table (docs/upgrading.md): every step is IF NOT EXISTS, the missing columns
 * and the 'cancelled' status are added, finished rows get a finish time (so retention applies to them), running
 * rows get an expired lease (so the sweeper puts them back), and the seed's NOTIFY trigger is replaced by ours.
 */
export class CreateBackgroundJobs1764460000000 implements MigrationInterface {
  name = 'CreateBackgroundJobs1764460000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      DO $$ BEGIN
        CREATE TYPE background_job_status AS ENUM ('queued', 'processing', 'failed', 'completed', 'cancelled');
      EXCEPTION WHEN duplicate_object THEN NULL;
      END $$`);
    await q.query(`ALTER TYPE background_job_status ADD VALUE IF NOT EXISTS 'cancelled'`);
    await q.query(`
      CREATE TABLE IF NOT EXISTS background_jobs (
        id               bigserial PRIMARY KEY,
        queue_name       text NOT NULL,
        payload          jsonb NOT NULL DEFAULT '{}',
        status           background_job_status NOT NULL DEFAULT 'queued',
        priority         integer NOT NULL DEFAULT 0,
        run_at           timestamptz NOT NULL DEFAULT now(),
        attempts         integer NOT NULL DEFAULT 0,
        max_attempts     integer NOT NULL DEFAULT 5 CHECK (max_attempts >= 1),
        locked_at        timestamptz,
        locked_by        text,
        lease_expires_at timestamptz,
        last_error       text,
        created_at       timestamptz NOT NULL DEFAULT now(),
        updated_at       timestamptz NOT NULL DEFAULT now(),
        finished_at      timestamptz
      )`);
    // Adopting the seed's table: the columns it lacks (a constant default adds no table rewrite).
    await q.query(`
      ALTER TABLE background_jobs
        ADD COLUMN IF NOT EXISTS priority integer NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS locked_by text,
        ADD COLUMN IF NOT EXISTS lease_expires_at timestamptz,
        ADD COLUMN IF NOT EXISTS finished_at timestamptz`);
    await q.query(`UPDATE background_jobs SET finished_at = updated_at WHERE finished_at IS NULL AND status IN ('completed', 'failed')`);
    await q.query(`UPDATE background_jobs SET lease_expires_at = now() WHERE lease_expires_at IS NULL AND status = 'processing'`);
    // The claim order is priority DESC, run_at, id. id in the key matters: thousands of jobs enqueued in one
    // transaction share one now() as run_at, and without id Postgres must fetch and sort all of them per claim.
    await q.query(`
      CREATE INDEX IF NOT EXISTS background_jobs_claim_idx ON background_jobs (queue_name, priority DESC, run_at, id)
      WHERE status = 'queued'`);
    // The seed's index: finds the next delayed job of a queue (workers arm a timer for it) in one probe.
    await q.query(`CREATE INDEX IF NOT EXISTS background_jobs_run_at_idx ON background_jobs (queue_name, run_at) WHERE status = 'queued'`);
    // Jobs in flight, for the sweeper and per-worker lookups; tiny, since only running jobs are in it. Keyed on
    // locked_by and not lease_expires_at on purpose: heartbeats rewrite lease_expires_at, and a column no index
    // covers lets those updates be HOT (no index writes, no index bloat).
    await q.query(`CREATE INDEX IF NOT EXISTS background_jobs_in_flight_idx ON background_jobs (locked_by) WHERE status = 'processing'`);
    // One NOTIFY per queue per statement, not per row: a 20k-row enqueueMany sends one notification.
    await q.query(`
      CREATE OR REPLACE FUNCTION background_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('pg_queue_jobs', q.queue_name) FROM (SELECT DISTINCT queue_name FROM new_jobs) AS q;
        RETURN NULL;
      END $$`);
    // The seed's trigger (one NOTIFY per row), whatever its name: any trigger of the table whose function calls pg_notify.
    const seedTriggers = (await q.query(`
      SELECT t.tgname AS name FROM pg_trigger AS t JOIN pg_proc AS p ON p.oid = t.tgfoid
      WHERE t.tgrelid = 'background_jobs'::regclass AND NOT t.tgisinternal AND p.prosrc ILIKE '%pg_notify%'`)) as { name: string }[];
    for (const { name } of seedTriggers) await q.query(`DROP TRIGGER ${q.connection.driver.escape(name)} ON background_jobs`);
    await q.query(`
      CREATE TRIGGER background_jobs_notify AFTER INSERT ON background_jobs
      REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION background_jobs_notify()`);
    // Every job is inserted, updated two or more times and deleted: a churn table. Vacuum it early and often
    // so dead tuples do not bloat the claim index.
    await q.query(`
      ALTER TABLE background_jobs SET (
        autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
        autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0, fillfactor = 90)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE background_jobs`);
    await q.query(`DROP FUNCTION background_jobs_notify()`);
    await q.query(`DROP TYPE background_job_status`);
  }
}
