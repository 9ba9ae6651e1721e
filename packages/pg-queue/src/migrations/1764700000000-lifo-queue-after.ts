import type { MigrationInterface, QueryRunner } from 'typeorm';
import { SqlEnqueue1764640000000 } from './1764640000000-sql-enqueue.js';
import { SqlEnqueueRunAt1764672000000 } from './1764672000000-sql-enqueue-run-at.js';
import { createIndexConcurrently, dropIndexConcurrently } from './concurrent-index.js';
import { inOwnTransaction } from './in-own-transaction.js';
import { enqueueFunctions, OLD_SCALAR_ARGUMENT_TYPES, SCALAR_ARGUMENT_TYPES } from './lifo-queue-after-enqueue.js';
import { successorFunctions } from './lifo-queue-after-successor.js';

/**
 * LIFO and `onConflict: 'queue-after'` (issue 43; README: "LIFO", "Unique jobs"; docs/concepts.md, "Claim order" and
 * "A successor that waits for a running job").
 *
 * LIFO:
 * - `background_jobs.lifo`: true for a job enqueued with `lifo: true` (NULL otherwise: a plain job writes nothing new).
 *   Added to background_jobs_history too, and background_jobs_all made again (JobHistory1764660000000's rule).
 * - `background_jobs_lifo_idx` and `background_jobs_lifo_key_idx`: the claim index and the keyed claim index over LIFO
 *   jobs only (`WHERE status = 'queued' AND lifo`), walked backwards by the claims of a queue that has LIFO jobs, so
 *   that they come before the queue's FIFO jobs of their priority (or key), newest first. A FIFO job satisfies neither
 *   predicate: no new index entry, and the plain claim keeps its statement and its index (claim.sql.ts, ClaimOrder).
 * - `background_queues.lifo_jobs`: set, once, by the first enqueue of a LIFO job to the queue (NOTIFY pg_queue_limits),
 *   read by every worker of the queue with its limits (QueueLimitsKeeper): from then on they claim with the variant
 *   that takes LIFO jobs first. A queue whose handler has `lifo: true` claims newest first whatever its jobs say.
 *
 * `onConflict: 'queue-after'` (BullMQ's keepLastIfActive):
 * - `background_job_successors`: one row per unique key that has a successor waiting for the key's running holder,
 *   pointing at the successor's job. The successor itself is a job row, `blocked` (outside the unique index, so the key
 *   stays its holder's; outside the claims), with the key. The row is the lock every 'queue-after' enqueue of the key
 *   takes first (an INSERT ... ON CONFLICT DO UPDATE, so that it is taken even for a row committed after the caller's
 *   snapshot): those enqueues of one key take turns, and at most one successor waits.
 * - `pg_queue_successor_step(queue, key, at_commit)`: moves the key's successor from blocked to queued once no live
 *   (queued or running) job holds the key, and forgets the row. Called by every statement that ends a job with a unique
 *   key (complete, fail for good, cancel, delete, the sweeper's dead letter: stepSuccessors in shared.sql.ts), in the
 *   statement, after its own writes (a VOLATILE function's statements see them); it skips a row another transaction has
 *   locked (an enqueue of the key in flight: its own check at commit, below, follows).
 * - A deferred constraint trigger on background_job_successors: at the commit of every transaction that made or changed
 *   a successor, the step again, taking a share lock on the key's live holders first. Either the holder ended before
 *   (the lock waits for an end in flight; the successor is promoted here), or it ends after this commit (its statement
 *   waits for the share lock, then its step sees the successor). No end of a holder can fall between the two, whatever
 *   the enqueue's transaction (a caller's, long) does: the share lock lasts only from the check to the commit, so a
 *   running holder's heartbeat never waits on a caller's transaction.
 * - The SQL enqueue functions (docs/guides/sql-enqueue.md) again, with `lifo` and 'queue-after' (the enqueue path of
 *   QueueService for calls that use either: enqueue.store.ts). pg_queue_enqueue_jobs also returns each job's outcome.
 *
 * Frozen once released, like every migration. `transaction = false`: the indexes are built CONCURRENTLY; the rest is
 * catalog-only (nullable columns without a default, a new table, functions), in short transactions of their own.
 */
export class LifoQueueAfter1764700000000 implements MigrationInterface {
  name = 'LifoQueueAfter1764700000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    const schema = await jobsSchema(q);
    await inOwnTransaction(q, async () => {
      await q.query(`ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS lifo boolean`);
      await q.query(`ALTER TABLE background_jobs_history ADD COLUMN IF NOT EXISTS lifo boolean`);
      await q.query(`CREATE OR REPLACE VIEW background_jobs_all AS SELECT * FROM background_jobs UNION ALL SELECT * FROM background_jobs_history`);
      await q.query(`ALTER TABLE background_queues ADD COLUMN IF NOT EXISTS lifo_jobs boolean`);
      await q.query(`
        CREATE TABLE IF NOT EXISTS background_job_successors (
          queue_name text NOT NULL,
          unique_key text NOT NULL,
          job_id     int8 NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now(),
          updated_at timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (queue_name, unique_key)
        )`);
      for (const statement of successorFunctions(schema)) await q.query(statement);
      await q.query(`DROP TRIGGER IF EXISTS background_job_successors_check ON background_job_successors`);
      await q.query(`
        CREATE CONSTRAINT TRIGGER background_job_successors_check AFTER INSERT OR UPDATE ON background_job_successors
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ${schema}.pg_queue_successor_checked()`);
      // The SQL enqueue functions: pg_queue_enqueue and pg_queue_enqueue_unique take one argument more (lifo), and the
      // internal pg_queue_enqueue_jobs returns one column more (outcome): both need a DROP, in the transaction of their
      // new versions, so that no caller finds them missing.
      await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_enqueue(${OLD_SCALAR_ARGUMENT_TYPES})`);
      await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_enqueue_unique(${OLD_SCALAR_ARGUMENT_TYPES})`);
      await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_enqueue_jobs(jsonb, text)`);
      for (const statement of enqueueFunctions(schema)) await q.query(statement);
    });
    await createIndexConcurrently(q, 'background_jobs_lifo_idx', `ON background_jobs (queue_name, priority DESC, run_at, id) WHERE status = 'queued' AND lifo`);
    await createIndexConcurrently(
      q,
      'background_jobs_lifo_key_idx',
      `ON background_jobs (queue_name, concurrency_key, run_at, id) WHERE status = 'queued' AND lifo AND concurrency_key IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    const schema = await jobsSchema(q);
    await dropIndexConcurrently(q, 'background_jobs_lifo_key_idx');
    await dropIndexConcurrently(q, 'background_jobs_lifo_idx');
    await inOwnTransaction(q, async () => {
      await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_enqueue_many(jsonb)`);
      await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_enqueue(${SCALAR_ARGUMENT_TYPES})`);
      await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_enqueue_unique(${SCALAR_ARGUMENT_TYPES})`);
      await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_enqueue_jobs(jsonb, text)`);
      await new SqlEnqueue1764640000000().up(q);
      await new SqlEnqueueRunAt1764672000000().up(q);
      await q.query(`DROP TABLE IF EXISTS background_job_successors`);
      await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_successor_checked()`);
      await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_successor_step(text, text, boolean)`);
      await q.query(`ALTER TABLE background_queues DROP COLUMN IF EXISTS lifo_jobs`);
      await q.query(`DROP VIEW IF EXISTS background_jobs_all`);
      await q.query(`ALTER TABLE background_jobs_history DROP COLUMN IF EXISTS lifo`);
      await q.query(`ALTER TABLE background_jobs DROP COLUMN IF EXISTS lifo`);
      await q.query(`CREATE VIEW background_jobs_all AS SELECT * FROM background_jobs UNION ALL SELECT * FROM background_jobs_history`);
    });
  }
}

/** The schema background_jobs lives in, quoted (as SqlEnqueue1764640000000 finds it). */
async function jobsSchema(q: QueryRunner): Promise<string> {
  const [{ schema }] = (await q.query(
    `SELECT quote_ident(n.nspname) AS schema FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE c.oid = 'background_jobs'::regclass`,
  )) as { schema: string }[];
  return schema;
}
