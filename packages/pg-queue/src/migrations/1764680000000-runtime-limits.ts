import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Limits changed at runtime, and by the handler (issue 42, part 2), on the per-queue row that holds `paused`:
 * - `limits` (jsonb): the operator's overrides of the decorator's limits (QueueService.setQueueLimits). NULL, or a
 *   key absent, means "the decorator's value"; a key whose value is JSON null means "no such limit", explicitly
 *   (one JSON column rather than a column per limit plus a sentinel for "none": the three states of each limit,
 *   default / none / a value, fit one object, and a new limit needs no migration).
 * - `blocked_until`: a partner's 429 (RateLimitedError without a key) blocks every start of the queue until then;
 *   `rate_backoff_ms`: the block's length, doubled by the next 429 that comes without a success between (NULL after one).
 * - `key_blocked_until`: the latest end of the queue's per-key blocks, so that the plain claim's single-row probe of
 *   this table knows whether any key of the queue is blocked without a per-row check.
 * - `background_queue_key_blocks`: the blocks of one concurrency key (RateLimitedError with a key).
 * The columns are nullable without a default (catalog-only, no table rewrite); the new table is small (one row per
 * key blocked, deleted once lapsed and reset).
 */
export class RuntimeLimits1764680000000 implements MigrationInterface {
  name = 'RuntimeLimits1764680000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE background_queues
        ADD COLUMN IF NOT EXISTS limits jsonb,
        ADD COLUMN IF NOT EXISTS blocked_until timestamptz,
        ADD COLUMN IF NOT EXISTS rate_backoff_ms integer,
        ADD COLUMN IF NOT EXISTS key_blocked_until timestamptz`);
    await q.query(`
      CREATE TABLE IF NOT EXISTS background_queue_key_blocks (
        queue_name      text NOT NULL,
        concurrency_key text NOT NULL,
        blocked_until   timestamptz NOT NULL,
        backoff_ms      integer,
        PRIMARY KEY (queue_name, concurrency_key)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS background_queue_key_blocks`);
    await q.query(`
      ALTER TABLE background_queues
        DROP COLUMN IF EXISTS key_blocked_until, DROP COLUMN IF EXISTS rate_backoff_ms,
        DROP COLUMN IF EXISTS blocked_until, DROP COLUMN IF EXISTS limits`);
  }
}
