import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { DataSource } from 'typeorm';
import { JobHandler, PgQueueModule, QueueService, type Job, type TransactionalJob } from 'nestjs-pg-queue';
import { WorkerPool } from '../../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from '../support/test-app.js';

// Transactional handlers at the moments the other specs leave to timing (issue 40, "The tests that are missing
// today"): the test holds a lock that the statement it wants to come second needs, waits (bounded) until the other
// side has done what it does, and only then lets the lock go. Every assertion reads the tables.

/** The advisory lock that a deferred trigger on `commit_gate` takes at COMMIT: the test holds it to hold a commit. */
const COMMIT_GATE = 404_040;
const backends = new Map<string, number>();
const returned = new Set<string>();

@Injectable()
class Handlers {
  /** Writes its ledger row; the first attempt waits for its abort (the timeout), then returns as if it had not seen it. */
  @JobHandler('m-tx-late', { transactional: true, timeoutMs: 300, maxAttempts: 2, backoff: { baseMs: 0, jitter: false } })
  async late(job: TransactionalJob) {
    backends.set(`${job.id}:${job.attempt}`, (await job.manager.query(`SELECT pg_backend_pid() AS pid`))[0].pid);
    await job.manager.query(`INSERT INTO ledger (job_id, attempt) VALUES ($1, $2)`, [job.id, job.attempt]);
    if (job.attempt === 1) {
      await new Promise((resolve) => (job.signal.aborted ? resolve(undefined) : job.signal.addEventListener('abort', resolve)));
      returned.add(job.id);
    }
    return { attempt: job.attempt };
  }

  /** A parent whose commit the test holds (its row in commit_gate takes the gate's lock at COMMIT). */
  @JobHandler('m-tx-parent', { transactional: true })
  async parent(job: TransactionalJob<{ spawn?: boolean }>) {
    await job.manager.query(`INSERT INTO commit_gate (job_id) VALUES ($1)`, [job.id]);
    // Its completion is then completeSpawning's, in the same transaction.
    if (job.payload.spawn) await job.spawn([{ ref: 'extra', queue: 'm-child', payload: {} }]);
  }

  @JobHandler('m-child')
  async child(job: Job) {
    await db.query(`INSERT INTO runs (job_id) VALUES ($1)`, [job.id]);
  }
}

let db: pg.Pool;

describe('transactional handlers: an aborted attempt, and the second look after a commit', () => {
  let app: INestApplicationContext;
  let dataSource: DataSource;
  let queue: QueueService;
  const status = async (id: string) => (await db.query(`SELECT status, attempts FROM background_jobs WHERE id = $1`, [id])).rows[0];

  beforeAll(async () => {
    const url = await createTestDatabase('mutations_tx');
    db = sqlPool(url);
    await db.query(`
      CREATE TABLE ledger (job_id int8, attempt int);
      CREATE TABLE runs (job_id int8);
      CREATE TABLE commit_gate (job_id int8);
      CREATE FUNCTION commit_gate_wait() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock(${COMMIT_GATE}); RETURN NULL; END $$;
      CREATE CONSTRAINT TRIGGER commit_gate_wait AFTER INSERT ON commit_gate DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW EXECUTE FUNCTION commit_gate_wait();`);
    dataSource = new DataSource({ type: 'postgres', url, extra: { max: 4 } });
    // No sweeper: its pass is the safety net for a missed second look, and would hide one.
    app = await startApp(url, { providers: [Handlers], imports: [PgQueueModule.forRoot({ dataSource, maintenance: { enabled: false } })] });
    await waitFor('LISTEN connection', async () => app.get(WorkerPool).listening);
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
    await dataSource?.destroy();
    await db?.end();
  });

  it('a handler that returns after its attempt was aborted (timed out) writes nothing, even before the failure is written', async () => {
    // The failure's statement records the attempt in background_job_attempts; the completion's does not. With that
    // table locked, the failure waits, and the late return meets a row that still says processing under its claim.
    const lock = await db.connect();
    let id = '';
    try {
      await lock.query(`BEGIN`);
      await lock.query(`LOCK TABLE background_job_attempts IN SHARE MODE`);
      id = await queue.enqueue('m-tx-late', {});
      await waitFor('the first attempt returned after its abort', async () => returned.has(id), 10_000, 10);
      const pid = backends.get(`${id}:1`)!;
      await waitFor('its transaction ended', async () => (await db.query(`SELECT state FROM pg_stat_activity WHERE pid = $1`, [pid])).rows[0]?.state === 'idle', 10_000, 10);
      await waitFor('the failure waiting for the table', async () =>
        (await db.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%WITH failed AS%'`)).rowCount! > 0,
      10_000, 10);
      expect(await db.query(`SELECT attempt FROM ledger WHERE job_id = $1`, [id]).then((r) => r.rows)).toEqual([]);
      expect(await status(id)).toEqual({ status: 'processing', attempts: 1 });
    } finally {
      await lock.query(`COMMIT`);
      lock.release();
    }
    expect(await queue.waitFor(id, { timeoutMs: 10_000 })).toEqual({ attempt: 2 });
    expect(await db.query(`SELECT attempt FROM ledger WHERE job_id = $1`, [id]).then((r) => r.rows)).toEqual([{ attempt: 2 }]);
  });

  it.each([
    ['completes', false],
    ['completes and spawns', true],
  ])('the last parent to commit, from a transactional handler that %s, unblocks the child itself (no sweeper runs)', async (_, spawn) => {
    const gate = await db.connect();
    try {
      await gate.query(`SELECT pg_advisory_lock($1)`, [COMMIT_GATE]);
      const flow = await queue.enqueueFlow({
        jobs: [
          { ref: 'p1', queue: 'm-tx-parent', payload: { spawn } },
          { ref: 'p2', queue: 'm-nobody', payload: {} },
          { ref: 'c', queue: 'm-child', payload: {}, dependsOn: ['p1', 'p2'] },
        ],
      });
      const { p1, p2, c } = flow.jobs;
      // p1's completion is written in its transaction (its edge resolved, p2's still open: c stays blocked), and its
      // COMMIT waits for the gate.
      await waitFor('p1 committing', async () =>
        (await db.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'`)).rowCount! > 0,
      10_000, 10);
      // p2 completes meanwhile and commits first: p1's edge is still open to it, and so is it to its own second look.
      const other = await db.connect();
      try {
        await other.query(`BEGIN`);
        await other.query(`UPDATE background_jobs SET status = 'completed', attempts = 1, finished_at = now() WHERE id = $1`, [p2]);
        await other.query(`SELECT pg_queue_flow_step($1, $2, 'p2', NULL, 'processing', 'completed')`, [p2, flow.id]);
        await other.query(`COMMIT`);
      } finally {
        other.release();
      }
      expect(await status(c)).toEqual({ status: 'blocked', attempts: 0 });
      await gate.query(`SELECT pg_advisory_unlock($1)`, [COMMIT_GATE]);
      // p1 commits last: only its own second look can see both edges resolved.
      await waitFor('the child ran', async () => (await status(c))?.status === 'completed', 10_000);
      expect(await status(p1)).toEqual({ status: 'completed', attempts: 1 });
      expect((await db.query(`SELECT count(*)::int AS n FROM runs WHERE job_id = $1`, [c])).rows[0].n).toBe(1);
      expect((await queue.waitForFlow(flow.id, { timeoutMs: 5_000 })).status).toBe('completed');
    } finally {
      await gate.query(`SELECT pg_advisory_unlock_all()`);
      gate.release();
    }
  });
});
