import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { WorkerPool } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { LEASE_JOB_STORE } from '../src/pg-queue.constants.js';
import { JobStore } from '../src/store/job.store.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

let db: pg.Pool;

@Injectable()
class HandlersA {
  @JobHandler('late', { concurrency: 4 })
  async late(job: Job) {
    await db.query(`INSERT INTO runs (job_id, worker, attempt) VALUES ($1, 'a', $2)`, [job.id, job.attempt]);
  }
}

@Injectable()
class HandlersB {
  @JobHandler('late', { concurrency: 4 })
  async late(job: Job) {
    await db.query(`INSERT INTO runs (job_id, worker, attempt) VALUES ($1, 'b', $2)`, [job.id, job.attempt]);
  }
}

// A process that stalls while its claim is in flight (SIGSTOP, a blocked event loop) gets the claim's answer
// after the leases it gave may have lapsed: the rows may have been swept and run elsewhere meanwhile. Found by
// the fault suite's SIGSTOP scenario with prefetch 'auto': on SIGCONT the stopped worker started two jobs that
// another worker had already run. Here the stall is the claim's answer held back until the other instance has
// swept and run the jobs.
describe('a claim answered after the process stalled', () => {
  let url: string;
  let a: INestApplicationContext;
  let b: INestApplicationContext | undefined;

  beforeAll(async () => {
    url = await createTestDatabase('stale_claim');
    db = sqlPool(url);
    await db.query('CREATE TABLE runs (job_id bigint NOT NULL, worker text NOT NULL, attempt int NOT NULL)');
    a = await startApp(url, { providers: [HandlersA], queue: { workerId: 'a', leaseMs: 1_000, heartbeatMs: 300, maintenance: { enabled: false } } });
    // Idle before the test wraps its claims: a start-up claim still in flight would take the jobs unwrapped.
    await waitFor('LISTEN connection', async () => a.get(WorkerPool).listening);
    await new Promise((r) => setTimeout(r, 300));
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await db?.end();
  });

  it('starts none of its jobs: each job runs once, on the instance that claimed it again', async () => {
    const store = a.get<JobStore>(LEASE_JOB_STORE); // the workers' claims run on the leases pool's store
    const claimJobs = store.claimJobs.bind(store);
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    let held = false;
    store.claimJobs = async (...args) => {
      const claimed = await claimJobs(...args);
      if (claimed.jobs.length > 0 && !held) {
        held = true;
        await released; // the stall: the answer is in, the process has not looked at it yet
      }
      return claimed;
    };
    const ids = await a.get(QueueService).enqueueMany([1, 2, 3].map((i) => ({ queue: 'late', payload: { i } })));
    await waitFor('a holding the three jobs', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE locked_by = 'a'`)).rows[0].n === 3);
    await new Promise((r) => setTimeout(r, 1_200)); // past the 1 s lease
    // The other instance sweeps (its sweeper would, every 5 s) and runs them.
    b = await startApp(url, { providers: [HandlersB], queue: { workerId: 'b', maintenance: { enabled: false } } });
    expect(await b.get(JobStore).rescueExpiredLeases()).toEqual({ held: true, requeued: 3, failed: 0, openFlows: false });
    await waitFor('b ran the three jobs', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1) AND status = 'completed'`, [ids])).rows[0].n === 3);
    release();
    await new Promise((r) => setTimeout(r, 500)); // a would have started them by now
    const { rows: runs } = await db.query(`SELECT job_id::text AS id, worker, attempt FROM runs ORDER BY job_id`);
    // b runs each once, as attempt 2: the sweeper cannot tell a started claim that never ran from one that did.
    expect(runs).toEqual(ids.map((id) => ({ id, worker: 'b', attempt: 2 })));
    const { rows: final } = await db.query(`SELECT status::text, attempts, locked_by FROM background_jobs WHERE id = ANY($1) ORDER BY id`, [ids]);
    expect(final).toEqual(ids.map(() => ({ status: 'completed', attempts: 2, locked_by: 'b' })));
    store.claimJobs = claimJobs;
  });
});
