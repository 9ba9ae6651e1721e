import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { MaintenanceScheduler, WorkerPool } from '../../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from '../support/test-app.js';

// Found by the fault-injection suite (scenario 3): a worker whose event loop stalls past its lease (a frozen
// process, a CPU-bound handler) can have the job swept and then claim it again itself, while the stale
// attempt is still in its books. Both attempts share the job id: settling the stale one must not free the
// new one's slot nor drop its lease, and the stale one must be told it lost the job.

let db: pg.Pool;
const aborted: string[] = [];
const gates = new Map<number, () => void>();

@Injectable()
class Stall {
  @JobHandler('stall', { concurrency: 2 })
  async stall(job: Job) {
    job.signal.addEventListener('abort', () => aborted.push(`attempt ${job.attempt}: ${(job.signal.reason as Error).message}`));
    const gate = new Promise<void>((resolve) => gates.set(job.attempt, resolve));
    await db.query('INSERT INTO runs (job_id, attempt) VALUES ($1, $2)', [job.id, job.attempt]);
    await gate; // ignores the signal, as a stalled handler would
  }
}

describe('a job swept from a stalled worker and claimed again by that same worker', () => {
  let app: INestApplicationContext;

  beforeAll(async () => {
    const url = await createTestDatabase('reclaim');
    db = sqlPool(url);
    await db.query('CREATE TABLE runs (job_id bigint, attempt int)');
    // Heartbeats far apart, sweeps by hand: the test decides what happens when.
    app = await startApp(url, { providers: [Stall], queue: { workerId: 'w1', leaseMs: 30_000, heartbeatMs: 10_000, maintenance: { enabled: false } } });
  });
  afterAll(async () => {
    for (const open of gates.values()) open();
    await app?.close();
    await db?.end();
  });

  it('keeps the new attempt’s slot, lease and cancellation, and aborts the stale one', async () => {
    const queue = app.get(QueueService);
    const pool = app.get(WorkerPool);
    const runs = async () => (await db.query<{ attempt: number }>('SELECT attempt FROM runs ORDER BY attempt')).rows.map((r) => r.attempt);
    const id = await queue.enqueue('stall', {});
    await waitFor('attempt 1 running', async () => (await runs()).length === 1);

    // The lease lapses while the worker is stalled; the sweeper puts the job back and NOTIFYs; the same
    // worker, free again, claims it: attempt 2 runs beside the stale attempt 1.
    await db.query(`UPDATE background_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [id]);
    expect((await app.get(MaintenanceScheduler).sweeper.runOnce()).requeued).toBe(1);
    await waitFor('attempt 2 running', async () => (await runs()).length === 2);
    expect(aborted).toEqual(['attempt 1: lease lost: the job was taken back (swept, cancelled) while running']);

    // The stale attempt finishes; its outcome is fenced out, and it must leave attempt 2's books alone.
    gates.get(1)!();
    await new Promise((r) => setTimeout(r, 300));
    expect(pool.activeCounts().stall).toBe(1);
    const leaseOf = async () => (await db.query<{ at: Date }>('SELECT lease_expires_at AS at FROM background_jobs WHERE id = $1', [id])).rows[0].at.getTime();
    const before = await leaseOf();
    await new Promise((r) => setTimeout(r, 20));
    await (pool as unknown as { leases: { beat(): Promise<void> } }).leases.beat();
    expect(await leaseOf()).toBeGreaterThan(before); // attempt 2 is still heartbeated

    expect(await queue.cancel(id)).toBe('cancelled');
    await waitFor('attempt 2 aborted', async () => aborted.length === 2);
    expect(aborted[1]).toBe('attempt 2: job was cancelled');
    expect(await queue.get(id)).toMatchObject({ status: 'cancelled', attempts: 2 });
    expect(await runs()).toEqual([1, 2]);
  });
});
