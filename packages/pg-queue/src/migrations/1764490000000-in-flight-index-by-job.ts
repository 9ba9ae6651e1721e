import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexConcurrently, dropIndexConcurrently, indexDefinition } from './concurrent-index.js';

/**
 * The in-flight index gets the job id as a second key: (locked_by, id) WHERE status = 'processing'.
 * Completions, failures and heartbeats look up "these ids, held by this worker". Keyed on locked_by alone,
 * the planner scanned every entry of the worker, and until vacuum removes them that includes one dead entry
 * for every job the worker ever ran: with a million jobs through one worker the completion statement became
 * the bottleneck (1M steady state: 6.2k jobs/s, against 19.4k for 50k). With the id in the key each lookup
 * is one probe per job. Heartbeats still do not touch an indexed column, so they stay HOT.
 * Built concurrently, outside a transaction; the old definition (which the released first migration built) is
 * dropped only when it is still the old one, so a re-run (a crash after the drop, a second instance) rebuilds
 * nothing that is already right. On a database the first migration creates now, there is none: built here.
 */
export class InFlightIndexByJob1764490000000 implements MigrationInterface {
  name = 'InFlightIndexByJob1764490000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await this.replace(q, '(locked_by, id)');
  }

  async down(q: QueryRunner): Promise<void> {
    await this.replace(q, '(locked_by)');
  }

  private async replace(q: QueryRunner, columns: string): Promise<void> {
    const def = await indexDefinition(q, 'background_jobs_in_flight_idx');
    if (def !== null && !def.includes(`USING btree ${columns} `)) await dropIndexConcurrently(q, 'background_jobs_in_flight_idx');
    await createIndexConcurrently(q, 'background_jobs_in_flight_idx', `ON background_jobs ${columns} WHERE status = 'processing'`);
  }
}
