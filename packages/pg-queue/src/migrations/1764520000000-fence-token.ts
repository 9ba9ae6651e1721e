import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * fence_token: a number every claim of a job increments and nothing else changes, so it only grows. The lease
 * owner's outcome, heartbeat and put-back are fenced by it. attempts cannot serve: retry() resets it and the
 * shutdown put-back takes one off, so an old attempt's late outcome could match a newer attempt's count.
 * A NOT NULL column with a constant default is a catalog-only change: no table rewrite, a brief lock.
 */
export class FenceToken1764520000000 implements MigrationInterface {
  name = 'FenceToken1764520000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE background_jobs ADD COLUMN fence_token int8 NOT NULL DEFAULT 0`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE background_jobs DROP COLUMN fence_token`);
  }
}
