import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexConcurrently, dropIndexConcurrently } from './concurrent-index.js';

/**
 * Priority within a key (issue 42: "within a key, priority then run_at order"): the keyed claim (`concurrencyPerKey`)
 * and the fair claim (`fairness`) take each key's due jobs highest priority first, then in the claim's order.
 *
 * `background_jobs_key_priority_idx`: the queued jobs with a key and a priority other than the default 0, by key, then
 * priority (highest first), run_at and id. The claims read each key's jobs of priority 0 from the keyed claim index
 * (background_jobs_key_claim_idx) as before, and those of other priorities from this one, read only while the queue
 * has any (one probe of this index per claim: claim-keyed.sql.ts, keyDue). A job of priority 0, or without a key, does
 * not satisfy the predicate: no new index entry, so keyless jobs and keyed jobs of the default priority write what
 * they wrote.
 *
 * Frozen once released, like every migration. `transaction = false`: the index is built CONCURRENTLY.
 */
export class KeyPriorities1764780000000 implements MigrationInterface {
  name = 'KeyPriorities1764780000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await createIndexConcurrently(
      q,
      'background_jobs_key_priority_idx',
      `ON background_jobs (queue_name, concurrency_key, priority DESC, run_at, id) WHERE status = 'queued' AND concurrency_key IS NOT NULL AND priority <> 0`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await dropIndexConcurrently(q, 'background_jobs_key_priority_idx');
  }
}
