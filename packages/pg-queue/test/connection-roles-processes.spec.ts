import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { JobHandler, QueueService, type Job, type PgQueueModuleOptions } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './faults/support/build-worker.js';
import { POOL_RUNS_TABLE, recordedRun } from './pools/pool-runs.js';
import type { PoolsWorkerConfig } from './pools/pools-worker.js';
import { forkLoaded, startForked } from './support/serve-start.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// Issue 39 item 5: the app's calls waiting on the app's locks must never starve the workers' heartbeats and
// outcomes. Instance A (this process) runs a long job and enqueues, without a manager, jobs whose uniqueKey an app
// transaction holds: each enqueue holds a connection of A's API pool while it waits on that lock. Instance B (an OS
// process, pools-worker.ts) runs the sweeper and a worker of the same queue. Both record every run in pool_runs.
// Before the pools per role, A's heartbeat waited behind those enqueues for a connection of the one queue pool,
// its lease lapsed, B swept the job and ran it a second time while A still ran it.
const WORKER_SOURCES = ['./pools/pools-worker.ts', './pools/pool-runs.ts'].map((file) => fileURLToPath(new URL(file, import.meta.url)));

let build: WorkerBuild;
beforeAll(async () => {
  build = await buildWorker(WORKER_SOURCES);
});
afterAll(async () => {
  await build?.remove();
});

let records: pg.Pool;

@Injectable()
class LongHandler {
  @JobHandler('long', { concurrency: 1 })
  async long(job: Job<{ ms: number }>) {
    await recordedRun(records, 'A', job);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Scenario {
  label: string;
  /** Instance A's options, over workerId 'A' (and no sweeper: B sweeps). */
  a: PgQueueModuleOptions;
  /** Instance B's options. */
  b: PoolsWorkerConfig['queue'];
  jobMs: number;
  /** How long the app's transaction holds the key. */
  holdMs: number;
  /** Enqueues of the held key that A makes meanwhile. */
  enqueues: number;
  /** Open the transaction this long after one of A's heartbeats renewed the job's lease (null: at once). */
  afterBeatMs: number | null;
}

async function starve(s: Scenario): Promise<void> {
  const url = await createTestDatabase(s.label);
  const db = sqlPool(url);
  records = new pg.Pool({ connectionString: url, max: 2 });
  let child: ChildProcess | undefined;
  let app: INestApplicationContext | undefined;
  let holder: pg.PoolClient | undefined;
  try {
    await db.query(POOL_RUNS_TABLE);
    const loaded = forkLoaded(build.script); // B loads Nest while A boots
    app = await startApp(url, { providers: [LongHandler], queue: { ...s.a, workerId: 'A', maintenance: { enabled: false } } });
    const queue = app.get(QueueService);
    const id = await queue.enqueue('long', { ms: s.jobMs });
    await waitFor('A running the job', async () => (await db.query(`SELECT 1 FROM pool_runs WHERE job_id = $1 AND worker = 'A'`, [id])).rowCount === 1, 10_000);
    // B starts once A holds the job (else B's worker could be the one to claim it).
    child = await startForked(await loaded, { config: { url, workerId: 'B', queue: { migrationsRun: false, ...s.b } } satisfies PoolsWorkerConfig });
    if (s.afterBeatMs !== null) {
      const lease = async () => (await db.query<{ at: Date }>(`SELECT lease_expires_at AS at FROM background_jobs WHERE id = $1`, [id])).rows[0].at.getTime();
      const before = await lease();
      await waitFor('a heartbeat of A', async () => (await lease()) !== before, 30_000, 10);
      await sleep(s.afterBeatMs);
    }
    // The app's transaction holds key K...
    holder = await db.connect();
    await holder.query('BEGIN');
    await queue.enqueue('keyed', { holder: true }, { uniqueKey: 'K', manager: holder });
    // ...and A enqueues K meanwhile: each insert waits on the transaction's lock, on a connection of A's API pool.
    const enqueues = Array.from({ length: s.enqueues }, (_, i) => queue.enqueue('keyed', { i }, { uniqueKey: 'K' }));
    await waitFor(`${s.enqueues} enqueues of A waiting on the app's lock`, async () => {
      const { rows } = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'nestjs-pg-queue%' AND wait_event_type = 'Lock'`,
      );
      return rows[0].n === s.enqueues;
    }, 10_000);
    await sleep(s.holdMs);
    await holder.query('COMMIT');
    holder.release();
    holder = undefined;
    expect((await Promise.allSettled(enqueues)).map((r) => r.status)).toEqual(Array(s.enqueues).fill('fulfilled'));
    // A's handler ends at jobMs; its outcome is then written (completed), or refused because the job was swept.
    await waitFor('A’s run ended and the job settled or taken over', async () => {
      const { rows } = await db.query<{ ended: boolean; status: string; locked_by: string | null }>(
        `SELECT r.ended_at IS NOT NULL AS ended, j.status, j.locked_by FROM pool_runs r JOIN background_jobs j ON j.id = r.job_id WHERE r.job_id = $1 AND r.worker = 'A'`,
        [id],
      );
      const [r] = rows;
      return r.ended && (r.status !== 'processing' || r.locked_by !== 'A');
    }, s.jobMs + 20_000, 50);
    const runs = await db.query(`SELECT worker, attempt FROM pool_runs WHERE job_id = $1 ORDER BY id`, [id]);
    expect(runs.rows).toEqual([{ worker: 'A', attempt: 1 }]);
    const job = await db.query(`SELECT status, attempts, locked_by FROM background_jobs WHERE id = $1`, [id]);
    expect(job.rows).toEqual([{ status: 'completed', attempts: 1, locked_by: 'A' }]);
    // No attempt was ended by a lapsed lease (the attempt history records every attempt that did not complete).
    expect((await db.query(`SELECT outcome, worker FROM background_job_attempts WHERE job_id = $1`, [id])).rows).toEqual([]);
  } finally {
    if (holder) {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
    child?.kill('SIGKILL');
    await app?.close();
    await records.end();
    await db.end();
  }
}

describe('connection roles: the app’s calls waiting on its locks never starve heartbeats (two processes)', () => {
  it('A (poolSize 3, leaseMs 4000) runs a 12 s job while its 3 enqueues of a key an app transaction holds for 9 s wait; B sweeps: the job runs once, completed by A', async () => {
    await starve({
      label: 'rolesstarve',
      a: { poolSize: 3, leaseMs: 4_000 },
      b: { leaseMs: 4_000, maintenance: { sweepIntervalMs: 200 } },
      jobMs: 12_000,
      holdMs: 9_000,
      enqueues: 3,
      afterBeatMs: null,
    });
  }, 60_000);

  // The defaults: poolSize 5, leaseMs 30 s (a heartbeat every 10 s), B's sweeper every 5 s. The transaction opens
  // 9 s after a heartbeat of A, so that before the pools per role the lease lapsed (30 s after that beat) 9 s before
  // the transaction ended: B's sweeper always had a pass in between.
  it('defaults: five such enqueues during a 30 s transaction; the 40 s job runs once, completed by A', async () => {
    await starve({ label: 'rolesdefaults', a: {}, b: {}, jobMs: 40_000, holdMs: 30_000, enqueues: 5, afterBeatMs: 9_000 });
  }, 120_000);
});
