import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { AdminStore } from '../src/store/admin.store.js';
import { useTestApp, waitFor } from './support/test-app.js';

@Injectable()
class Flaky {
  @JobHandler('always-fails', { maxAttempts: 3, backoff: (attempt) => 200 * attempt })
  async fail(job: Job) {
    await t.db.query('INSERT INTO attempts (job_id, attempt) VALUES ($1, $2)', [job.id, job.attempt]);
    throw new Error(`boom on attempt ${job.attempt}`);
  }

  @JobHandler('fails-once', { maxAttempts: 3, backoff: { baseMs: 50, jitter: false } })
  async failOnce(job: Job) {
    await t.db.query('INSERT INTO attempts (job_id, attempt) VALUES ($1, $2)', [job.id, job.attempt]);
    if (job.attempt === 1) throw new Error('transient');
  }
}

const t = useTestApp('retry', { providers: [Flaky], queue: { pollIntervalMs: 60_000 } }, (db) => db.query('CREATE TABLE attempts (job_id bigint, attempt int, at timestamptz NOT NULL DEFAULT clock_timestamp())'));

describe('retries with backoff, then the dead letter', () => {
  it('retries on the backoff schedule and dead-letters at maxAttempts', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('always-fails', { x: 1 });
    await waitFor('dead letter', async () => (await queue.get(id))?.status === 'failed');

    const job = await queue.get(id);
    expect(job).toMatchObject({ status: 'failed', attempts: 3, maxAttempts: 3 });
    expect(job!.lastError).toContain('boom on attempt 3');
    expect(job!.finishedAt).toBeInstanceOf(Date);
    expect(job!.leaseExpiresAt).toBeNull();

    // Gaps between attempts, measured on the database clock: at least the backoff (200 ms, then 400 ms),
    // and not a poll interval later (polling is set to a minute: the worker's own timer brought them back).
    const { rows } = await t.db.query<{ attempt: number; gap_ms: number | null }>(
      `SELECT attempt, (extract(epoch FROM at - lag(at) OVER (ORDER BY attempt)) * 1000)::float8 AS gap_ms
       FROM attempts WHERE job_id = $1 ORDER BY attempt`,
      [id],
    );
    expect(rows.map((r) => r.attempt)).toEqual([1, 2, 3]);
    expect(rows[1].gap_ms!).toBeGreaterThanOrEqual(200);
    expect(rows[1].gap_ms!).toBeLessThan(5_000);
    expect(rows[2].gap_ms!).toBeGreaterThanOrEqual(400);
    expect(rows[2].gap_ms!).toBeLessThan(5_000);
  });

  it('completes on a later attempt and keeps the last error of the failed one', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('fails-once', {});
    await waitFor('completion', async () => (await queue.get(id))?.status === 'completed');
    const job = await queue.get(id);
    expect(job).toMatchObject({ status: 'completed', attempts: 2 });
    expect(job!.lastError).toContain('transient');
  });

  it('retry(id) puts a dead-lettered job back with fresh attempts; retry of a live job is refused', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('always-fails', {}, { maxAttempts: 1 });
    await waitFor('dead letter', async () => (await queue.get(id))?.status === 'failed');
    expect(await queue.retry(id)).toBe(true);
    await waitFor('second dead letter', async () => {
      const n = await t.db.query('SELECT count(*)::int AS n FROM attempts WHERE job_id = $1', [id]);
      return n.rows[0].n === 2 && (await queue.get(id))?.status === 'failed';
    });
    expect((await queue.get(id))!.attempts).toBe(1);
    const waiting = await queue.enqueue('fails-once', {}, { delayMs: 60_000 });
    expect(await queue.retry(waiting)).toBe(false); // queued, not failed: nothing to retry
    expect((await queue.get(waiting))!.status).toBe('queued');
  });

  it('a retry, one by id or a batch (dashboard, CLI), clears the lease owner and keeps the last error as the previous attempt’s', async () => {
    // Dead letters of a queue nobody handles, as a worker leaves them: its id and claim time on the row.
    const { rows } = await t.db.query<{ id: string }>(
      `INSERT INTO background_jobs (queue_name, payload, status, attempts, max_attempts, finished_at, locked_by, locked_at, last_error)
       SELECT 'retry-unhandled', '{}', 'failed', 3, 3, now(), 'worker-that-died', now() - interval '1 minute', 'Error: boom ' || g FROM generate_series(1, 3) AS g RETURNING id::text`,
    );
    const [one, ...batch] = rows.map((r) => r.id);
    expect(await t.app.get(QueueService).retry(one)).toBe(true);
    const admin = new AdminStore(t.db);
    expect(await admin.bulkBatch('retry', { ids: batch, statuses: ['failed'] }, '0', 100)).toMatchObject({ changed: 2 });
    const { rows: after } = await t.db.query(
      `SELECT status::text AS status, attempts, locked_by, locked_at, lease_expires_at, finished_at, last_error FROM background_jobs WHERE queue_name = 'retry-unhandled' ORDER BY id`,
    );
    expect(after).toEqual([1, 2, 3].map((g) => ({ status: 'queued', attempts: 0, locked_by: null, locked_at: null, lease_expires_at: null, finished_at: null, last_error: `Error: boom ${g}` })));
  });
});
