import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The NOTIFY trigger skips a statement that says it will send the wake-up itself: QueueService's own
 * autocommit inserts set `pg_queue.wake` to 'deferred' (transaction-local, in the insert statement) and notify
 * after their commit, coalesced, from a transaction that holds PostgreSQL's NOTIFY commit lock for
 * microseconds instead of for a WAL flush (docs/performance.md, Concurrent enqueue). The trigger clears the
 * setting, so a later statement of the same transaction is notified as before. Every other insert (raw SQL,
 * enqueues in a caller's transaction, an older library) is notified by the trigger exactly as before.
 * Replaces the function only: no lock on background_jobs, no rewrite. Until this runs, the library's
 * deferred wake-ups come on top of the trigger's (workers are woken twice: harmless).
 */
export class DeferredWakeUps1764590000000 implements MigrationInterface {
  name = 'DeferredWakeUps1764590000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE OR REPLACE FUNCTION background_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF current_setting('pg_queue.wake', true) = 'deferred' THEN
          PERFORM set_config('pg_queue.wake', '', true);
          RETURN NULL;
        END IF;
        PERFORM pg_notify('pg_queue_jobs', q.queue_name) FROM (SELECT DISTINCT queue_name FROM new_jobs) AS q;
        RETURN NULL;
      END $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE OR REPLACE FUNCTION background_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('pg_queue_jobs', q.queue_name) FROM (SELECT DISTINCT queue_name FROM new_jobs) AS q;
        RETURN NULL;
      END $$`);
  }
}
