import type pg from 'pg';

/** The seed application's schema, as an app that grew from it has it (its own names for the index and trigger). */
export const SEED_SCHEMA = [
  `CREATE TYPE background_job_status AS ENUM ('queued', 'processing', 'failed', 'completed')`,
  `CREATE TABLE background_jobs (
     id bigserial PRIMARY KEY,
     queue_name text NOT NULL,
     payload jsonb NOT NULL DEFAULT '{}',
     status background_job_status NOT NULL DEFAULT 'queued',
     locked_at timestamptz,
     run_at timestamptz NOT NULL DEFAULT now(),
     attempts integer NOT NULL DEFAULT 0,
     max_attempts integer NOT NULL DEFAULT 5,
     last_error text,
     created_at timestamptz NOT NULL DEFAULT now(),
     updated_at timestamptz NOT NULL DEFAULT now())`,
  `CREATE INDEX idx_background_jobs_pending ON background_jobs (queue_name, run_at) WHERE status = 'queued'`,
  `CREATE FUNCTION notify_background_job() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN PERFORM pg_notify('background_jobs', NEW.queue_name); RETURN NEW; END $$`,
  `CREATE TRIGGER background_jobs_inserted AFTER INSERT ON background_jobs FOR EACH ROW EXECUTE FUNCTION notify_background_job()`,
  `ALTER TABLE background_jobs SET (autovacuum_vacuum_scale_factor = 0.05)`,
];

/**
 * The seed's schema holding `rows` jobs of a seed app that ran for a while: nearly all finished (94% completed, 5%
 * failed, over the last 30 days), 1% still queued, and a few running. Loaded before the seed's trigger exists (one
 * NOTIFY per row would only slow the load), then vacuumed and analyzed, as autovacuum would have left it.
 */
export async function createSeedTable(db: pg.Pool, rows: number): Promise<void> {
  const [type, table, index, notifyFunction, ...afterLoad] = SEED_SCHEMA;
  for (const statement of [type, table, index, notifyFunction]) await db.query(statement);
  await db.query(
    `INSERT INTO background_jobs (queue_name, payload, status, attempts, locked_at, run_at, created_at, updated_at, last_error)
     SELECT 'mail-' || (g % 7), jsonb_build_object('to', 'user' || g || '@example.com', 'template', 'welcome'),
       s.status, CASE WHEN s.status = 'failed' THEN 5 ELSE 1 END,
       CASE WHEN s.status = 'processing' THEN now() - interval '1 minute' END,
       t.at, t.at, CASE WHEN s.status = 'queued' THEN t.at ELSE t.at + interval '2 seconds' END,
       CASE WHEN s.status = 'failed' THEN 'Error: SMTP 421 too many connections' END
     FROM generate_series(1, $1::int) AS g
     CROSS JOIN LATERAL (SELECT (CASE WHEN g % 100 < 94 THEN 'completed' WHEN g % 100 < 99 THEN 'failed'
                                      WHEN g % 1000 = 999 THEN 'processing' ELSE 'queued' END)::background_job_status AS status) AS s
     CROSS JOIN LATERAL (SELECT now() - interval '30 days' * (1 - g::float8 / $1) AS at) AS t`,
    [rows],
  );
  for (const statement of afterLoad) await db.query(statement);
  await db.query(`VACUUM (ANALYZE) background_jobs`);
}
