import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { JobStore, MaintenanceScheduler } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

const ran: { id: string; attempt: number }[] = [];

@Injectable()
class Worker {
  @JobHandler('orphans')
  async run(job: Job) {
    ran.push({ id: job.id, attempt: job.attempt });
  }
}

describe('sweeper', () => {
  let url: string;
  let app: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    url = await createTestDatabase('sweeper');
    db = sqlPool(url);
    app = await startApp(url, { providers: [Worker], queue: { maintenance: { sweepIntervalMs: 100 } } });
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('puts back a job whose worker vanished, and fences out the vanished worker', async () => {
    const store = app.get(JobStore);
    const queue = app.get(QueueService);
    // A worker claims the job and then vanishes: no heartbeat, no outcome. Stop our own workers from
    // racing it for the claim by enqueueing to a queue nobody handles, then moving it.
    const id = await queue.enqueue('ghost-queue', { v: 1 });
    const claim = await store.claimJobs('ghost-queue', 1, 'ghost-worker', 1_000);
    expect(claim.jobs.map((j) => j.id)).toEqual([id]);
    await db.query(`UPDATE background_jobs SET queue_name = 'orphans' WHERE id = $1`, [id]);
    expect(await queue.get(id)).toMatchObject({ status: 'processing', lockedBy: 'ghost-worker', attempts: 1 });

    // Within one lease (1 s) plus a sweep interval, a live worker runs it.
    await waitFor('rescued job completed', async () => (await queue.get(id))?.status === 'completed', 10_000);
    const job = await queue.get(id);
    expect(job).toMatchObject({ status: 'completed', attempts: 2 });
    expect(job!.lockedBy).not.toBe('ghost-worker');
    expect(job!.lastError).toContain('lease expired: worker ghost-worker');
    expect(ran).toEqual([{ id, attempt: 2 }]);

    // The ghost wakes up and reports: its outcome matches no row (wrong owner and fence token), and is refused.
    expect(await store.completeJobs('ghost-worker', [{ id, token: claim.jobs[0].token }])).toEqual(new Set([id]));
    expect(await store.failJobs('ghost-worker', [{ id, token: claim.jobs[0].token, error: 'late', retryDelayMs: 0 }])).toEqual(new Map());
    expect(await queue.get(id)).toMatchObject({ status: 'completed', attempts: 2 });
  });

  // The test above asserts the fence after the rescued job completed, when a completed row refuses any outcome
  // anyway; here the vanished worker reports while the job's next claim is running it.
  it('a vanished worker that reports while the rescued job runs again changes nothing, under its own id or the same', async () => {
    const store = app.get(JobStore);
    const queue = app.get(QueueService);
    for (const nextWorker of ['live-worker', 'ghost-worker']) {
      const id = await queue.enqueue('ghost-queue-4', {});
      const [ghost] = (await store.claimJobs('ghost-queue-4', 1, 'ghost-worker', 1_000)).jobs;
      expect(ghost.id).toBe(id);
      await waitFor('swept back to the queue', async () => (await queue.get(id))?.status === 'queued', 10_000);
      await db.query(`UPDATE background_jobs SET run_at = now() WHERE id = $1`, [id]); // due now, whatever the retry delay
      // Claimed again, by another worker or by a process that came back under the same worker id.
      const [next] = (await store.claimJobs('ghost-queue-4', 1, nextWorker, 60_000)).jobs;
      expect(next.id).toBe(id);
      const running = { status: 'processing', lockedBy: nextWorker, attempts: 2 };
      expect(await queue.get(id)).toMatchObject(running);

      expect(await store.completeJobs('ghost-worker', [ghost])).toEqual(new Set([id]));
      expect(await store.completeJobs('ghost-worker', [ghost], true)).toEqual(new Set([id]));
      expect(await store.failJobs('ghost-worker', [{ ...ghost, error: 'late', retryDelayMs: 0 }])).toEqual(new Map());
      expect(await store.extendLeases('ghost-worker', 60_000, [ghost])).toEqual(new Set());
      expect(await queue.get(id)).toMatchObject({ ...running, lastError: expect.stringContaining('lease expired: worker ghost-worker') });

      expect(await store.completeJobs(nextWorker, [next])).toEqual(new Set());
      expect(await queue.get(id)).toMatchObject({ status: 'completed', attempts: 2 });
    }
  });

  it('dead-letters an orphan that had no attempts left', async () => {
    const store = app.get(JobStore);
    const queue = app.get(QueueService);
    const id = await queue.enqueue('ghost-queue-2', {}, { maxAttempts: 1 });
    await store.claimJobs('ghost-queue-2', 1, 'ghost-worker', 1_000);
    await waitFor('dead letter', async () => (await queue.get(id))?.status === 'failed', 10_000);
    expect((await queue.get(id))!.lastError).toContain('lease expired');
  });

  it('leaves a job with a live lease alone', async () => {
    const store = app.get(JobStore);
    const queue = app.get(QueueService);
    const id = await queue.enqueue('ghost-queue-3', {});
    await store.claimJobs('ghost-queue-3', 1, 'slow-but-alive', 60_000);
    const result = await app.get(MaintenanceScheduler).sweeper.runOnce();
    expect(result.ran).toBe(true);
    expect(await queue.get(id)).toMatchObject({ status: 'processing', lockedBy: 'slow-but-alive' });
  });
});

describe('pruner', () => {
  it('deletes only finished jobs past their retention', async () => {
    const url = await createTestDatabase('pruner');
    const db = sqlPool(url);
    const app = await startApp(url, {
      queue: { workers: false, maintenance: { enabled: false, completedRetentionMs: 3_600_000, failedRetentionMs: 86_400_000, pruneBatchSize: 7 } },
    });
    // Ages relative to the database clock.
    await db.query(`
      INSERT INTO background_jobs (queue_name, status, finished_at, created_at)
      SELECT 'p', s.status::background_job_status, now() - s.age, now() - interval '30 days'
      FROM (VALUES
        ('completed', interval '2 hours'), ('completed', interval '2 hours'), ('completed', interval '10 minutes'),
        ('failed', interval '2 days'), ('failed', interval '2 hours'), ('cancelled', interval '3 days')
      ) AS s(status, age),
      generate_series(1, 5)`);
    await db.query(`INSERT INTO background_jobs (queue_name, created_at) SELECT 'p', now() - interval '30 days' FROM generate_series(1, 5)`);
    await db.query(`INSERT INTO background_jobs (queue_name, status, locked_by, lease_expires_at, created_at)
                    SELECT 'p', 'processing', 'w', now() + interval '1 minute', now() - interval '30 days' FROM generate_series(1, 5)`);

    const result = await app.get(MaintenanceScheduler).pruner.runOnce();
    expect(result).toEqual({ ran: true, completed: 10, failed: 10, partitions: 0 });
    const { rows } = await db.query<{ status: string; age: string; n: number }>(`
      SELECT status::text, coalesce(date_trunc('minute', now() - finished_at)::text, '-') AS age, count(*)::int AS n
      FROM background_jobs GROUP BY 1, 2 ORDER BY 1, 2`);
    expect(rows).toEqual([
      { status: 'completed', age: '00:10:00', n: 5 },
      { status: 'failed', age: '02:00:00', n: 5 },
      { status: 'processing', age: '-', n: 5 },
      { status: 'queued', age: '-', n: 5 },
    ]);
    await app.close();
    await db.end();
  });

  it('keeps failed jobs forever with failedRetentionMs: null, and runs on one instance at a time', async () => {
    const url = await createTestDatabase('pruner2');
    const db = sqlPool(url);
    const app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false, completedRetentionMs: 0, failedRetentionMs: null } } });
    await db.query(`INSERT INTO background_jobs (queue_name, status, finished_at) VALUES ('p', 'failed', now() - interval '1 year'), ('p', 'completed', now() - interval '1 second')`);
    // Another instance holds the prune lock: this pass must do nothing.
    const other = await db.connect();
    await other.query('BEGIN');
    await other.query('SELECT pg_advisory_xact_lock(7263514003)');
    expect(await app.get(MaintenanceScheduler).pruner.runOnce()).toEqual({ ran: false, completed: 0, failed: 0, partitions: 0 });
    await other.query('COMMIT');
    other.release();
    expect(await app.get(MaintenanceScheduler).pruner.runOnce()).toEqual({ ran: true, completed: 1, failed: 0, partitions: 0 });
    const left = await db.query(`SELECT status::text FROM background_jobs`);
    expect(left.rows).toEqual([{ status: 'failed' }]);
    await app.close();
    await db.end();
  });
});
