import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { MaintenanceScheduler } from '../src/internal.js';
import type { INestApplicationContext } from '@nestjs/common';
import { createTestDatabase } from '@internal/pg-harness';
import { SQL } from '../src/store/job.sql.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

/** Waits until some backend runs the pruner's DELETE and is blocked on a row lock. */
async function prunerBlocked(db: pg.Pool): Promise<void> {
  await waitFor('pruner waiting on the row lock', async () => {
    const { rows } = await db.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%DELETE FROM background_jobs%'`,
    );
    return rows[0].n > 0;
  });
}

describe('pruner against concurrent retry (issue 13 item 6)', () => {
  let app: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    const url = await createTestDatabase('prunerace');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false, completedRetentionMs: 60_000, failedRetentionMs: 60_000 } } });
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  async function failedJobFinishedAnHourAgo(queue: string): Promise<string> {
    const { rows } = await db.query(
      `INSERT INTO background_jobs (queue_name, status, attempts, finished_at, last_error)
       VALUES ($1, 'failed', 5, now() - interval '1 hour', 'boom') RETURNING id`,
      [queue],
    );
    return rows[0].id;
  }

  /** Runs a pruner pass that blocks on the row `a` holds, commits `a`, and expects the pass to delete nothing. */
  async function pruneWhileCommitting(a: { query: (text: string) => Promise<unknown> }): Promise<void> {
    const pass = app.get(MaintenanceScheduler).pruner.runOnce();
    await prunerBlocked(db);
    await a.query('COMMIT');
    expect(await pass).toEqual({ ran: true, completed: 0, failed: 0, partitions: 0 });
  }

  it('does not delete a job that retry() put back while the pruner waited on its row', async () => {
    const id = await failedJobFinishedAnHourAgo('race-retry');
    const a = await db.connect();
    try {
      await a.query('BEGIN');
      const { rows } = await a.query(SQL.retryJob, [id, false]);
      expect(rows[0].retried).toBe(true);
      // The pruner's snapshot still sees the job failed an hour ago; it must wait for A's row lock.
      await pruneWhileCommitting(a);
    } finally {
      a.release();
    }
    expect(await app.get(QueueService).get(id)).toMatchObject({ status: 'queued', attempts: 0 });
  });

  it('does not delete a retried job that is already running', async () => {
    const id = await failedJobFinishedAnHourAgo('race-running');
    const a = await db.connect();
    try {
      // Retry and claim in one transaction: when the pruner gets the row, the job is running.
      await a.query('BEGIN');
      await a.query(SQL.retryJob, [id, false]);
      const claimed = await a.query(SQL.claimJobs, ['race-running', 1, 'w1', 60_000, 1, 60_000, 0, null]);
      expect(claimed.rows.filter((r) => r.id !== null).map((r) => r.id)).toEqual([id]);
      await pruneWhileCommitting(a);
    } finally {
      a.release();
    }
    expect(await app.get(QueueService).get(id)).toMatchObject({ status: 'processing', lockedBy: 'w1', attempts: 1 });
  });
});

describe('pruner with the largest retention accepted (issue 13 item 12)', () => {
  it('runs its passes and keeps every row with retention Number.MAX_SAFE_INTEGER', async () => {
    const url = await createTestDatabase('pruneoverflow');
    const db = sqlPool(url);
    const app = await startApp(url, {
      queue: { workers: false, maintenance: { enabled: false, completedRetentionMs: Number.MAX_SAFE_INTEGER, failedRetentionMs: Number.MAX_SAFE_INTEGER } },
    });
    try {
      await db.query(`INSERT INTO background_jobs (queue_name, status, finished_at) VALUES ('p', 'completed', now() - interval '10 years'), ('p', 'failed', now() - interval '10 years')`);
      expect(await app.get(MaintenanceScheduler).pruner.runOnce()).toEqual({ ran: true, completed: 0, failed: 0, partitions: 0 });
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM background_jobs`);
      expect(rows[0].n).toBe(2);
    } finally {
      await app.close();
      await db.end();
    }
  });
});
