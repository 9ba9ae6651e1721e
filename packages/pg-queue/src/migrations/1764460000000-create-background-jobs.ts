import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexConcurrently } from './concurrent-index.js';
import { inOwnTransaction } from './in-own-transaction.js';

/** The columns the seed's table lacks, in the order they are added (a constant default adds no table rewrite). */
const ADOPTED_COLUMNS: [name: string, definition: string][] = [
  ['priority', 'integer NOT NULL DEFAULT 0'],
  ['locked_by', 'text'],
  ['lease_expires_at', 'timestamptz'],
  ['finished_at', 'timestamptz'],
];

/** Rows per backfill statement: each one a short transaction that locks only the rows it writes. */
const BACKFILL_BATCH = 5_000;

/**
 * The seed's background_jobs table, enum, NOTIFY trigger and autovacuum settings, plus what the features need:
 * priority, a lease (owner + expiry, fenced by attempts), finished_at for retention, and the claim index.
 *
 * It also adopts an existing seed table (docs/upgrading.md): every step is IF NOT EXISTS, the missing columns
 * and the 'cancelled' status are added, finished rows get a finish time (so retention applies to them), running
 * rows get an expired lease (so the sweeper puts them back), and the seed's NOTIFY trigger is replaced by ours.
 *
 * Outside a transaction, so that adopting a large table never holds ACCESS EXCLUSIVE for longer than a catalog
 * change (issue 18 item 7: as one transaction, the ADD COLUMN's lock lasted through the backfill and two index
 * builds, 7.2 s on 1M rows, and every enqueue and claim waited). Each step is short and safe to run again (the
 * runner retries the migration after a lock_timeout): the ALTER only when a column is missing, the backfill in
 * batches of its own transactions, the claim index built CONCURRENTLY. The seed's (queue_name, run_at) index and
 * the in-flight index are left to the next two migrations, which build them CONCURRENTLY in their final form (this
 * migration used to build both here, the first a duplicate of the seed's own under another name).
 */
export class CreateBackgroundJobs1764460000000 implements MigrationInterface {
  name = 'CreateBackgroundJobs1764460000000';
  transaction = false;

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
    // Adopting the seed's table: the columns it lacks. Checked first: even with IF NOT EXISTS everywhere, ALTER TABLE
    // takes ACCESS EXCLUSIVE, and a retry of this migration should not queue the app's statements for nothing.
    const present = new Set(
      ((await q.query(`SELECT attname FROM pg_attribute WHERE attrelid = 'background_jobs'::regclass AND attnum > 0 AND NOT attisdropped`)) as { attname: string }[]).map((r) => r.attname),
    );
    const missing = ADOPTED_COLUMNS.filter(([name]) => !present.has(name));
    if (missing.length > 0) await q.query(`ALTER TABLE background_jobs ${missing.map(([name, definition]) => `ADD COLUMN IF NOT EXISTS ${name} ${definition}`).join(', ')}`);
    await backfill(q);
    // The claim order is priority DESC, run_at, id. id in the key matters: thousands of jobs enqueued in one
    // transaction share one now() as run_at, and without id Postgres must fetch and sort all of them per claim.
    await createIndexConcurrently(q, 'background_jobs_claim_idx', `ON background_jobs (queue_name, priority DESC, run_at, id) WHERE status = 'queued'`);
    // One NOTIFY per queue per statement, not per row: a 20k-row enqueueMany sends one notification.
    await q.query(`
      CREATE OR REPLACE FUNCTION background_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('pg_queue_jobs', q.queue_name) FROM (SELECT DISTINCT queue_name FROM new_jobs) AS q;
        RETURN NULL;
      END $$`);
    // Ours in and the seed's out together: no insert in between goes unnotified. The seed's trigger, whatever its
    // name: any other trigger of the table whose function calls pg_notify.
    await inOwnTransaction(q, async () => {
      const triggers = (await q.query(`
        SELECT t.tgname AS name FROM pg_trigger AS t JOIN pg_proc AS p ON p.oid = t.tgfoid
        WHERE t.tgrelid = 'background_jobs'::regclass AND NOT t.tgisinternal AND p.prosrc ILIKE '%pg_notify%'`)) as { name: string }[];
      if (!triggers.some((t) => t.name === 'background_jobs_notify')) {
        await q.query(`
          CREATE TRIGGER background_jobs_notify AFTER INSERT ON background_jobs
          REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION background_jobs_notify()`);
      }
      for (const { name } of triggers) if (name !== 'background_jobs_notify') await q.query(`DROP TRIGGER ${q.connection.driver.escape(name)} ON background_jobs`);
    });
    // Every job is inserted, updated two or more times and deleted: a churn table. Vacuum it early and often
    // so dead tuples do not bloat the claim index. (SHARE UPDATE EXCLUSIVE: inserts and updates go on.)
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

/**
 * An adopted table's finished rows get finished_at = updated_at (retention then applies to them), its running rows
 * an already expired lease (the sweeper puts them back). A walk over the primary key, BACKFILL_BATCH ids per
 * statement, each statement its own transaction: row locks on finished and abandoned rows only, held for one batch,
 * which no enqueue or claim touches. On a new (empty) table, one statement that finds nothing.
 */
async function backfill(q: QueryRunner): Promise<void> {
  for (let after = '0'; ; ) {
    const [{ last }] = (await q.query(
      `WITH batch AS (SELECT id FROM background_jobs WHERE id > $1 ORDER BY id LIMIT $2),
       adopted AS (
         -- Run to completion whether or not the outer query reads it (a data-modifying WITH always is).
         UPDATE background_jobs AS j
         SET finished_at = CASE WHEN j.status IN ('completed', 'failed') THEN j.updated_at ELSE j.finished_at END,
             lease_expires_at = CASE WHEN j.status = 'processing' THEN now() ELSE j.lease_expires_at END
         FROM batch
         WHERE j.id = batch.id
           AND ((j.finished_at IS NULL AND j.status IN ('completed', 'failed')) OR (j.lease_expires_at IS NULL AND j.status = 'processing'))
         RETURNING 1)
       SELECT max(id)::text AS last FROM batch`,
      [after, BACKFILL_BATCH],
    )) as { last: string | null }[];
    if (last === null) return;
    after = last;
  }
}
