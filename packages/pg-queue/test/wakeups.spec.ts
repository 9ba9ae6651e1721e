import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { WorkerPool } from '../src/internal.js';
import { LEASE_JOB_STORE } from '../src/pg-queue.constants.js';
import type { JobStore } from '../src/store/job.store.js';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

let db: pg.Pool;
const started = new Map<string, number>();

@Injectable()
class Handlers {
  // eagerStart off: these tests are about the wake-up an enqueue sends to a worker (an eager start sends none).
  @JobHandler('instant', { eagerStart: false })
  async instant(job: Job) {
    started.set(job.id, performance.now());
  }

  @JobHandler('instant-eager')
  async instantEager(job: Job) {
    started.set(job.id, performance.now());
  }

  @JobHandler('busy', { concurrency: 1 })
  async busy(job: Job) {
    await new Promise((r) => setTimeout(r, 100));
    await db.query('INSERT INTO starts (job_id) VALUES ($1)', [job.id]);
  }

  @JobHandler('delayed')
  async delayed(job: Job) {
    await db.query('INSERT INTO starts (job_id) VALUES ($1)', [job.id]);
  }
}

describe('wake-ups with polling set to a minute', () => {
  let url: string;
  let app: INestApplicationContext;

  beforeAll(async () => {
    url = await createTestDatabase('wakeups');
    db = sqlPool(url);
    await db.query('CREATE TABLE starts (job_id bigint, at timestamptz NOT NULL DEFAULT clock_timestamp())');
    app = await startApp(url, { providers: [Handlers], queue: { pollIntervalMs: 60_000, fallbackPollIntervalMs: 60_000 } });
    await waitFor('LISTEN connection', async () => app.get(WorkerPool).listening);
    await new Promise((r) => setTimeout(r, 200)); // let the start-up claims settle into idle
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('starts a job enqueued while idle within 100 ms (NOTIFY, not polling)', async () => {
    const queue = app.get(QueueService);
    const latencies: number[] = [];
    for (let i = 0; i < 7; i++) {
      await new Promise((r) => setTimeout(r, 50)); // idle again between jobs
      const t0 = performance.now();
      const id = await queue.enqueue('instant', { i });
      await waitFor('start', async () => started.has(id), 5_000, 1);
      latencies.push(started.get(id)! - t0);
    }
    latencies.sort((a, b) => a - b);
    // The median decides (a loaded CI machine may hiccup once); a poll would have taken a minute.
    expect(latencies[3]).toBeLessThan(100);
    expect(latencies[6]).toBeLessThan(2_000);
  });

  it('starts delayed jobs at their run_at, by the worker’s own timer', async () => {
    const queue = app.get(QueueService);
    const a = await queue.enqueue('delayed', {}, { delayMs: 600 });
    const runAt = new Date(Date.now() + 1_200);
    const b = await queue.enqueue('delayed', {}, { runAt });
    await waitFor('both delayed jobs', async () => (await db.query('SELECT count(*)::int AS n FROM starts')).rows[0].n === 2, 10_000);
    const { rows } = await db.query<{ job_id: string; late_ms: number }>(`
      SELECT s.job_id::text, (extract(epoch FROM s.at - j.run_at) * 1000)::float8 AS late_ms
      FROM starts s JOIN background_jobs j ON j.id = s.job_id ORDER BY s.at`);
    expect(rows.map((r) => r.job_id)).toEqual([a, b]);
    for (const r of rows) {
      expect(r.late_ms).toBeGreaterThanOrEqual(0); // never early
      expect(r.late_ms).toBeLessThan(500); // and not a poll later
    }
  });

  /** Enqueues 20 jobs of `queue`, each after the previous one completed; returns how many claims the worker sent. */
  async function claimsForOneAtATime(queue: string): Promise<number> {
    const store = app.get<JobStore>(LEASE_JOB_STORE); // the workers' claims run on the leases pool's store
    let claims = 0;
    const claimJobs = store.claimJobs.bind(store);
    store.claimJobs = (...args) => ((claims += 1), claimJobs(...args));
    try {
      for (let i = 0; i < 20; i++) {
        const id = await app.get(QueueService).enqueue(queue, { i });
        await waitFor('start', async () => started.has(id), 5_000, 1);
        await waitFor('completed', async () => (await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0].status === 'completed', 5_000, 5);
      }
    } finally {
      store.claimJobs = claimJobs;
    }
    return claims;
  }

  // A finished job used to rouse a claim whatever the last claim had found: at one job at a time that was a
  // second, empty claim per job, and a job enqueued while it was in flight waited for it.
  it('one job at a time costs one claim per job, not two', async () => {
    const claims = await claimsForOneAtATime('instant');
    expect(claims).toBeGreaterThanOrEqual(20);
    expect(claims).toBeLessThanOrEqual(22); // one per job (a NOTIFY may land while a claim is in flight: one more)
  });

  // Eager start (the default): the same jobs, enqueued in the worker's process with a slot free, start from their
  // insert; no NOTIFY wakes a claim.
  it('with eager start, one job at a time costs no claim at all', async () => {
    expect(await claimsForOneAtATime('instant-eager')).toBe(0);
    const { rows } = await db.query<{ attempts: number; fence_token: string }>(`SELECT DISTINCT attempts, fence_token FROM background_jobs WHERE queue_name = 'instant-eager'`);
    expect(rows).toEqual([{ attempts: 1, fence_token: '1' }]);
  });

  it('jobs enqueued while every slot is busy start as slots free, without a poll', async () => {
    const queue = app.get(QueueService);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await queue.enqueue('busy', { i }));
    // The handler records its run as it ends; its outcome is written after that: wait for both.
    await waitFor('all four ran', async () => (await db.query('SELECT count(*)::int AS n FROM starts WHERE job_id = ANY($1)', [ids])).rows[0].n === 4, 10_000);
    await waitFor('all four completed', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1) AND status = 'completed'`, [ids])).rows[0].n === 4, 5_000);
    const { rows } = await db.query(`SELECT count(*)::int AS n, count(DISTINCT job_id)::int AS jobs FROM starts WHERE job_id = ANY($1)`, [ids]);
    expect(rows[0]).toEqual({ n: 4, jobs: 4 }); // each ran once
  });
});
