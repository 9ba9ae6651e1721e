import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `buffered`: true while a row is claimed (`processing`, leased to a worker) but its handler has not started:
 * the job waits in that worker's read-ahead buffer. Such a row has not been charged an attempt, holds a short
 * lease, and is put back without a charge when its holder dies (the sweeper), is given back, or its queue is
 * paused; a unique key's `replace` rewrites it in place. The worker clears it with its first heartbeat after the
 * start, or with the outcome, whichever comes first (docs/concepts.md, The life of a held job).
 * A constant default on PostgreSQL 11+ is catalog-only: no rewrite, a brief lock. Not indexed, so the updates
 * that write it stay as they were. An older worker never sets it: its rows read as started, as they are.
 */
export class BufferedJobs1764600000000 implements MigrationInterface {
  name = 'BufferedJobs1764600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS buffered boolean NOT NULL DEFAULT false`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE background_jobs DROP COLUMN IF EXISTS buffered`);
  }
}
