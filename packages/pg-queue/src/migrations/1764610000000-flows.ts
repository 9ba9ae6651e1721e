import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexConcurrently, dropIndexConcurrently } from './concurrent-index.js';
import { FLOW_FUNCTIONS } from '../store/flow-functions.sql.js';

/**
 * Flows (docs/guides/flows.md): jobs that depend on jobs.
 * - `blocked`, a job status of its own: a dependent waits in it until its parents are done. Never claimed (the claim
 *   index is `WHERE status = 'queued'`), never counted as queued or due.
 * - `background_flows`: one row per flow, its state (running, failing, compensating, then completed, failed,
 *   compensated, compensation_failed or cancelled); `announced`, set once a worker that ran one of its jobs has
 *   emitted the flow's 'flow-finished' event.
 * - `background_job_deps`: one row per edge, parent to child, with the child's policy when the parent fails for good
 *   (fail, cancel, continue) and `done` once the edge is resolved. A parent resolves only its own edges, so a fan-in
 *   of many parents writes many rows, not one: see flow-functions.sql.ts for how a child is then unblocked exactly once.
 * - On background_jobs: `flow_id`, `flow_ref` (the job's name in its flow), `compensate` (the job to run if the flow
 *   fails after this one completed) and `compensates` (set on a compensation job: the job it undoes). Nullable
 *   without a default: catalog-only. Two partial indexes cover flow jobs only, so a plain job pays no entry.
 * - The flow functions (store/flow-functions.sql.ts): every statement of the queue that ends a job, or takes one out of a final
 *   status (the workers' settles, the sweeper, cancel, retry, the dashboard's and CLI's bulk actions and deletes),
 *   calls pg_queue_flow_step for its rows of flows, in the same statement, so the flow moves on fenced as that
 *   statement is. Not a trigger: an AFTER ROW UPDATE trigger made PostgreSQL fetch every updated row's old version,
 *   claims and heartbeats included, whatever its WHEN said (5% of no-op throughput; docs/performance.md, Flows).
 * The enum value is added outside a transaction: PostgreSQL refuses to use a value added in the same transaction.
 * `down` drops everything but the enum value (PostgreSQL cannot drop one); no row keeps it after the drop.
 */
export class Flows1764610000000 implements MigrationInterface {
  name = 'Flows1764610000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TYPE background_job_status ADD VALUE IF NOT EXISTS 'blocked'`);
    await q.query(`
      DO $$ BEGIN
        CREATE TABLE IF NOT EXISTS background_flows (
          id            bigserial PRIMARY KEY,
          name          text,
          status        text NOT NULL DEFAULT 'running'
                        CHECK (status IN ('running', 'failing', 'compensating', 'completed', 'failed', 'compensated', 'compensation_failed', 'cancelled')),
          failed_job_id bigint,
          reason        text,
          announced     boolean NOT NULL DEFAULT false,
          created_at    timestamptz NOT NULL DEFAULT now(),
          updated_at    timestamptz NOT NULL DEFAULT now(),
          finished_at   timestamptz
        );
        CREATE INDEX IF NOT EXISTS background_flows_open_idx ON background_flows (id) WHERE finished_at IS NULL;
        CREATE INDEX IF NOT EXISTS background_flows_finished_idx ON background_flows (finished_at) WHERE finished_at IS NOT NULL;
        CREATE TABLE IF NOT EXISTS background_job_deps (
          flow_id    bigint NOT NULL,
          parent_id  bigint NOT NULL,
          child_id   bigint NOT NULL,
          on_failure text NOT NULL DEFAULT 'fail' CHECK (on_failure IN ('fail', 'cancel', 'continue')),
          done       boolean NOT NULL DEFAULT false,
          PRIMARY KEY (parent_id, child_id)
        );
        CREATE INDEX IF NOT EXISTS background_job_deps_child_idx ON background_job_deps (child_id);
        CREATE INDEX IF NOT EXISTS background_job_deps_open_idx ON background_job_deps (child_id, parent_id) WHERE NOT done;
        CREATE INDEX IF NOT EXISTS background_job_deps_flow_idx ON background_job_deps (flow_id);
      EXCEPTION WHEN unique_violation OR duplicate_table OR duplicate_object THEN NULL;
      END $$`);
    await q.query(`
      ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS flow_id bigint, ADD COLUMN IF NOT EXISTS flow_ref text,
        ADD COLUMN IF NOT EXISTS compensate jsonb, ADD COLUMN IF NOT EXISTS compensates bigint`);
    await createIndexConcurrently(q, 'background_jobs_flow_idx', `ON background_jobs (flow_id, status) WHERE flow_id IS NOT NULL`);
    // The sweeper's safety net reads blocked jobs through this one (status first); every blocked job is a flow job.
    await createIndexConcurrently(q, 'background_jobs_flow_status_idx', `ON background_jobs (status, id) WHERE flow_id IS NOT NULL`);
    for (const statement of FLOW_FUNCTIONS) await q.query(statement);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP FUNCTION IF EXISTS pg_queue_flow_step(bigint, bigint, text, bigint, text, text)`);
    await q.query(`DROP FUNCTION IF EXISTS pg_queue_flow_deleted(bigint, bigint, text, bigint)`);
    await q.query(`DROP FUNCTION IF EXISTS pg_queue_flow_job_ended(bigint, bigint, text, bigint, boolean, text)`);
    await q.query(`DROP FUNCTION IF EXISTS pg_queue_flow_settle(bigint)`);
    await q.query(`DROP FUNCTION IF EXISTS pg_queue_flow_unblock(bigint)`);
    // Jobs still blocked cannot keep a status the code below this migration does not know.
    await q.query(`UPDATE background_jobs SET status = 'cancelled', finished_at = now(), last_error = 'flows removed by a migration revert' WHERE status = 'blocked'`);
    await dropIndexConcurrently(q, 'background_jobs_flow_status_idx');
    await dropIndexConcurrently(q, 'background_jobs_flow_idx');
    await q.query(`ALTER TABLE background_jobs DROP COLUMN IF EXISTS compensates, DROP COLUMN IF EXISTS compensate, DROP COLUMN IF EXISTS flow_ref, DROP COLUMN IF EXISTS flow_id`);
    await q.query(`DROP TABLE IF EXISTS background_job_deps`);
    await q.query(`DROP TABLE IF EXISTS background_flows`);
  }
}
