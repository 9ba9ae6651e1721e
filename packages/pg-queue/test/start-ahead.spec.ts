import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import type { QueueWorker } from '../src/worker/queue-worker.js';
import { WorkerPool } from '../src/worker/worker-pool.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// Jobs marked started ahead of a free slot (state `armed`, StartAhead; docs/concepts.md, "The life of a held job"):
// with fast jobs the worker marks as many buffered jobs as its slots finish during one start mark, so that a freed
// slot starts the next job at once. Asserted from the tables: an armed row says started (charged, not buffered) with
// no handler called; a cancel drops it uncalled; shutdown gives it back uncharged; a job on its last attempt is never
// armed. Two gated jobs hold both slots while the test looks.

const RUNS = `CREATE TABLE sa_runs (job_id int8, attempt int, at timestamptz DEFAULT clock_timestamp())`;
let db: pg.Pool;
/** One gate per name: every handler that waits on it is let go together. */
const gates = new Map<string, { opened: Promise<void>; open: () => void }>();
function gate(name: string) {
  let g = gates.get(name);
  if (!g) {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    gates.set(name, (g = { opened, open }));
  }
  return g;
}

@Injectable()
class Handlers {
  @JobHandler('sa-arm', { concurrency: 2, prefetch: 10, eagerStart: false, maxAttempts: 3 })
  async arm(job: Job<{ gate?: string; warm?: boolean }>) {
    if (job.payload.warm) return; // no-op: far shorter than a start mark's round trip
    await db.query(`INSERT INTO sa_runs (job_id, attempt) VALUES ($1, $2)`, [job.id, job.attempt]);
    if (job.payload.gate) await gate(job.payload.gate).opened;
  }

  @JobHandler('sa-last', { concurrency: 2, prefetch: 10, eagerStart: false, maxAttempts: 1 })
  async last(job: Job<{ gate?: string; warm?: boolean }>) {
    if (job.payload.warm) return;
    await db.query(`INSERT INTO sa_runs (job_id, attempt) VALUES ($1, $2)`, [job.id, job.attempt]);
    if (job.payload.gate) await gate(job.payload.gate).opened;
  }
}

describe('start ahead: buffered jobs marked started before a slot frees (armed)', () => {
  let app: INestApplicationContext;
  let queue: QueueService;
  let closed = false;
  beforeAll(async () => {
    const url = await createTestDatabase('start_ahead');
    db = sqlPool(url);
    await db.query(RUNS);
    app = await startApp(url, { providers: [Handlers], queue: { leaseMs: 30_000, maintenance: { enabled: false } } });
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    for (const g of gates.values()) g.open();
    if (!closed) await app?.close();
    await db?.end();
  });

  const worker = (name: string) => (app.get(WorkerPool) as unknown as { workers: Map<string, QueueWorker> }).workers.get(name)!;
  /** Rows of the queue that say started (processing, not buffered) and whose handler was never called. */
  const startedUncalled = async (name: string) =>
    (
      await db.query<{ id: string; attempts: number }>(
        `SELECT j.id::text, j.attempts FROM background_jobs j WHERE j.queue_name = $1 AND j.status = 'processing' AND NOT j.buffered
           AND NOT EXISTS (SELECT 1 FROM sa_runs r WHERE r.job_id = j.id) ORDER BY j.id`,
        [name],
      )
    ).rows;

  /** No-op jobs first (the estimates: a job takes far less than a mark's round trip), then two gated jobs and eight more behind them. */
  async function holdBothSlots(name: string, gateName: string): Promise<{ gated: string[]; behind: string[] }> {
    const warm = await queue.enqueueMany(Array.from({ length: 30 }, () => ({ queue: name, payload: { warm: true } })));
    await waitFor('the warm-up jobs', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'completed'`, [warm])).rows[0].n === warm.length);
    await queue.pause(name);
    const gated = await queue.enqueueMany([0, 1].map(() => ({ queue: name, payload: { gate: gateName }, priority: 10 })));
    const behind = await queue.enqueueMany(Array.from({ length: 8 }, () => ({ queue: name, payload: {} })));
    await queue.resume(name);
    await waitFor('both gated jobs running', async () => (await db.query(`SELECT count(*)::int AS n FROM sa_runs WHERE job_id = ANY($1::int8[])`, [gated])).rows[0].n === 2);
    return { gated, behind };
  }

  it('a job on its last attempt is never marked ahead: only the running jobs\' rows say started', async () => {
    const { gated, behind } = await holdBothSlots('sa-last', 'last');
    // The worker holds the eight behind the gated ones (claimed), none marked started.
    await waitFor('the jobs behind claimed', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'processing'`, [behind])).rows[0].n === behind.length);
    // Several heartbeats and buffer reviews later (each pumps the worker), still none of them says started.
    for (let i = 0; i < 10; i++) {
      expect(await startedUncalled('sa-last')).toEqual([]);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    gate('last').open();
    await waitFor('all ran', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'completed'`, [[...gated, ...behind]])).rows[0].n === 10);
  });

  it('armed rows say started (charged, full lease) before any handler; a cancel drops one uncalled; shutdown gives the rest back uncharged', async () => {
    const { gated, behind } = await holdBothSlots('sa-arm', 'arm');
    // Both slots busy: the next jobs in claim order are held started ahead (by the claim, or by a start mark), as many
    // as the slots finish during one round trip: no-op jobs, so several on a quiet machine. On one loaded to 12 runnable
    // processes per core the estimates held one (a CI run): the cancel below needs one, the shutdown the rest (if any).
    const armed = await waitFor('jobs marked ahead', async () => {
      const rows = await startedUncalled('sa-arm');
      return rows.length >= 1 ? rows : undefined;
    });
    expect(armed.map((r) => r.id)).toEqual(behind.slice(0, armed.length));
    expect(armed.every((r) => r.attempts === 1)).toBe(true);
    const lease = await db.query<{ ms: number }>(`SELECT min(extract(epoch FROM lease_expires_at - now()) * 1000)::float8 AS ms FROM background_jobs WHERE id = ANY($1::int8[])`, [armed.map((r) => r.id)]);
    expect(lease.rows[0].ms).toBeGreaterThan(20_000); // the full lease, not the buffer's 5 s

    // A cancel takes the row (it says started: the cancel aborts through the worker), and the worker drops it uncalled.
    // Asked by id: the count of what it holds also moves when buffered jobs behind reach their start deadline and go
    // back (2.5 s after their claim, on a loaded machine: a CI run of 2026-12-07 waited for a count it never saw).
    // The job cancelled is one the worker still holds armed: with both slots held by the gates, its buffer review reads a
    // stall and gives armed jobs back (uncharged) once no slot has freed for a while, which on a machine loaded by two
    // copies of the suite came before this line (issue 39's rounds, 2026-12-07). One given back meanwhile is cancelled
    // from the queue instead (uncharged); either way its handler is never called.
    const held = (worker('sa-arm') as unknown as { state: { held: Map<string, { state: string }> } }).state.held;
    const target = armed.find((r) => held.get(r.id)?.state === 'armed') ?? armed[0];
    const armedAtCancel = held.get(target.id)?.state === 'armed';
    expect(await queue.cancel(target.id)).toBe('cancelled');
    await waitFor('the worker to drop the cancelled armed job', async () => !held.has(target.id));

    // Shutdown: what is armed or buffered goes back first, uncharged, while the gated jobs drain.
    const rest = armed.filter((r) => r.id !== target.id).map((r) => r.id);
    closed = true;
    const closing = app.close();
    await waitFor('the armed jobs back in the queue', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'queued'`, [rest])).rows[0].n === rest.length);
    gate('arm').open();
    await closing;
    const rows = (await db.query<{ id: string; status: string; attempts: number }>(`SELECT id::text, status::text, attempts FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id`, [armed.map((r) => r.id)])).rows;
    const expected = armed.map((r) => (r.id === target.id ? { id: r.id, status: 'cancelled', attempts: armedAtCancel ? 1 : expect.any(Number) } : { id: r.id, status: 'queued', attempts: 0 }));
    expect(rows).toEqual(expected);
    // Cancelled while armed: the row said started (charged); given back first: uncharged. Never more.
    expect(rows.find((r) => r.id === target.id)!.attempts).toBeLessThanOrEqual(1);
    expect((await db.query(`SELECT job_id FROM sa_runs WHERE job_id = ANY($1::int8[])`, [armed.map((r) => r.id)])).rows).toEqual([]);
    expect((await db.query(`SELECT status::text, count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) GROUP BY 1`, [gated])).rows).toEqual([{ status: 'completed', n: 2 }]);
  });
});
