import { Injectable, Logger } from '@nestjs/common';
import { describe, expect, it, jest } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { WorkerPool } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, statusCounts, waitFor } from './support/test-app.js';

const aborted: string[] = [];

/** Lets a given number of waiting handlers finish; the rest wait. */
const gate = {
  waiting: [] as (() => void)[],
  credit: 0,
  open(n: number) {
    this.credit += n;
    while (this.credit > 0 && this.waiting.length) {
      this.credit--;
      this.waiting.shift()!();
    }
  },
  pass(): Promise<void> {
    if (this.credit > 0) {
      this.credit--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  },
};

@Injectable()
class Prefetching {
  @JobHandler('prefetch', { concurrency: 2, prefetch: 6 })
  async handle() {
    await gate.pass();
  }
}
let unstick: () => void = () => undefined;
const stuckUntilTestEnds = new Promise<void>((resolve) => (unstick = resolve));

@Injectable()
class Slow {
  @JobHandler('slow', { concurrency: 4 })
  async slow() {
    await new Promise((r) => setTimeout(r, 400));
  }

  // Ignores its signal on purpose: shutdown must not wait for it past the grace period.
  @JobHandler('stuck', { concurrency: 2 })
  async stuck(job: Job) {
    job.signal.addEventListener('abort', () => aborted.push(job.id));
    await stuckUntilTestEnds;
  }
}

const startedAfterClose: string[] = [];

@Injectable()
class Recording {
  @JobHandler('late-claim', { concurrency: 5 })
  async handle(job: Job) {
    startedAfterClose.push(job.id);
  }
}

let letGo: () => void = () => undefined;
const heldUntilLetGo = new Promise<void>((resolve) => (letGo = resolve));

@Injectable()
class Hung {
  @JobHandler('hung', { concurrency: 2 })
  async hung() {
    await heldUntilLetGo;
  }
}

describe('graceful shutdown', () => {
  // A put-back blocked in the database (here a table lock; in life a lock, a hung connection) used to hold
  // the shutdown for as long as it lasted.
  it('gives the put-back a deadline, and names the jobs it could not put back', async () => {
    const url = await createTestDatabase('put-back-deadline');
    const db = sqlPool(url);
    const errors = jest.spyOn(Logger.prototype, 'error');
    const app = await startApp(url, { providers: [Hung], queue: { shutdownGraceMs: 200 } });
    const locker = await db.connect();
    try {
      const ids = await app.get(QueueService).enqueueMany([{ queue: 'hung', payload: 1 }, { queue: 'hung', payload: 2 }]);
      await waitFor('2 running', async () => app.get(WorkerPool).activeCounts().hung === 2);
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE background_jobs IN SHARE MODE');
      const t0 = Date.now();
      const closing = app.close();
      const line = await waitFor('the put-back given up', async () => errors.mock.calls.map((c) => String(c[0])).find((m) => m.includes('could not put back')), 10_000);
      const gaveUpAfterMs = Date.now() - t0;
      expect(gaveUpAfterMs).toBeLessThan(7_000); // grace 200 ms + the 5 s put-back deadline
      expect(line).toContain('could not put back 2 job(s)');
      for (const id of ids) expect(line).toContain(id);
      await locker.query('COMMIT');
      await closing;
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
      errors.mockRestore();
      letGo();
      await db.end();
    }
  }, 20_000);

  // The claim loop's last claim may still be in flight when shutdown begins; its jobs used to start anyway,
  // during shutdown, under a grace period meant for jobs already running.
  it('starts none of the jobs a claim in flight at shutdown returns, and puts them back at once', async () => {
    const url = await createTestDatabase('late-claim');
    const db = sqlPool(url);
    const app = await startApp(url, { providers: [Recording], queue: { shutdownGraceMs: 5_000, pollIntervalMs: 60_000 } });
    const queue = app.get(QueueService);
    await queue.pause('late-claim');
    await queue.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ queue: 'late-claim', payload: { i } })));
    // A SHARE lock lets the claim read but holds its UPDATE: the claim is in flight until the lock goes.
    const locker = await db.connect();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE background_jobs IN SHARE MODE');
    await queue.resume('late-claim');
    await waitFor('claim waiting on the lock', async () => {
      const { rows } = await db.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%candidates%'`);
      return rows.length > 0;
    });
    const closing = app.close();
    await new Promise((r) => setTimeout(r, 200));
    await locker.query('COMMIT');
    locker.release();
    const t0 = Date.now();
    await closing;
    expect(Date.now() - t0).toBeLessThan(2_000); // nothing ran, so nothing to wait for
    expect(startedAfterClose).toEqual([]);
    const { rows } = await db.query(`SELECT status::text, attempts, locked_by IS NULL AS unowned, lease_expires_at FROM background_jobs`);
    expect(rows).toHaveLength(5);
    for (const row of rows) expect(row).toMatchObject({ status: 'queued', attempts: 0, lease_expires_at: null });
    await db.end();
  });

  it('stops claiming and lets running jobs finish', async () => {
    const url = await createTestDatabase('drain');
    const db = sqlPool(url);
    const app = await startApp(url, { providers: [Slow], queue: { shutdownGraceMs: 5_000 } });
    const queue = app.get(QueueService);
    await queue.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ queue: 'slow', payload: { i } })));
    await waitFor('4 running', async () => app.get(WorkerPool).activeCounts().slow === 4);
    await app.close();
    // The 4 that ran finished and were recorded; the 2 never claimed wait in the queue, untouched.
    expect(await statusCounts(db, 'slow')).toEqual({ completed: 4, queued: 2 });
    const { rows } = await db.query(`SELECT attempts FROM background_jobs WHERE status = 'queued'`);
    expect(rows).toEqual([{ attempts: 0 }, { attempts: 0 }]);
    await db.end();
  });

  it('aborts what outlives the grace period and puts it back without counting the attempt', async () => {
    const url = await createTestDatabase('abandon');
    const db = sqlPool(url);
    const app = await startApp(url, { providers: [Slow], queue: { shutdownGraceMs: 300 } });
    const queue = app.get(QueueService);
    const ids = await queue.enqueueMany([{ queue: 'stuck', payload: 1 }, { queue: 'stuck', payload: 2 }]);
    await waitFor('2 running', async () => app.get(WorkerPool).activeCounts().stuck === 2);
    const t0 = Date.now();
    await app.close();
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(aborted.sort()).toEqual([...ids].sort());
    const { rows } = await db.query(`SELECT status::text, attempts, lease_expires_at FROM background_jobs ORDER BY id`);
    expect(rows).toEqual([
      { status: 'queued', attempts: 0, lease_expires_at: null },
      { status: 'queued', attempts: 0, lease_expires_at: null },
    ]);
    unstick();
    await db.end();
  });

  it('prefetches beyond the free slots, runs the buffer without a round trip, and puts it back at shutdown', async () => {
    const url = await createTestDatabase('prefetch');
    const db = sqlPool(url);
    const app = await startApp(url, { providers: [Prefetching], queue: { shutdownGraceMs: 300 } });
    const queue = app.get(QueueService);
    await queue.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ queue: 'prefetch', payload: { i } })));
    // 2 running + 6 prefetched hold leases; the other 12 stay queued for other instances.
    await waitFor('8 claimed', async () => (await statusCounts(db, 'prefetch')).processing === 8);
    expect(app.get(WorkerPool).activeCounts().prefetch).toBe(2);
    expect(await statusCounts(db, 'prefetch')).toEqual({ processing: 8, queued: 12 });
    gate.open(4); // four finish: their slots are refilled from the buffer
    await waitFor('4 completed', async () => (await statusCounts(db, 'prefetch')).completed === 4);
    await app.close(); // the 2 running outlive the grace period; they and the 2 still buffered go back
    expect(await statusCounts(db, 'prefetch')).toEqual({ completed: 4, queued: 16 });
    const { rows } = await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE status = 'queued' AND attempts <> 0`);
    expect(rows[0].n).toBe(0); // put back without counting an attempt
    await db.end();
  });
});
