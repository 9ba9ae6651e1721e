import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './faults/support/build-worker.js';
import { forkLoaded, startForked } from './support/serve-start.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';
import type { LateStartWorkerConfig } from './threads/late-start-worker.js';

// A thread handler's job begins on its thread only while its lease holds: the thread, once its file has loaded, asks
// the main thread (which owns the lease) before it calls the function, and a main thread that stalled past the job's
// start deadline refuses (ThreadPool.mayBegin). The simulation saw jobs begin on their thread after the sweeper had
// given them to another process: the thread's first job waited for the file's import while its process stalled
// (seeds 659653567, 449838067). One worker process (late-start-worker.ts), asserted from the runs the thread file
// records (thread_runs, with the attempt) and the jobs' rows.

const LEASE_MS = 1_000;
/** The thread file's import: longer than half the lease, so the job's start deadline passes while it loads. */
const SLOW_LOAD_MS = 2_000;
/**
 * The stall: from just after the job's claim until after its thread is ready. Longer than the lease, so the 'block'
 * job's own lease lapses in it too: at its end the job's completion races this worker's sweeper (overdue after the
 * stall), and a sweeper that wins puts it back. It is enqueued with one attempt, so it never runs (stalls) again.
 */
const BLOCK_MS = 3_500;

let build: WorkerBuild;
let db: pg.Pool;
let app: INestApplicationContext;
let queue: QueueService;
let worker: ChildProcess | undefined;
let stderr = '';

interface JobRow {
  status: string;
  attempts: number;
}

async function row(id: string): Promise<JobRow> {
  const { rows } = await db.query<JobRow>(`SELECT status::text, attempts FROM background_jobs WHERE id = $1`, [id]);
  return rows[0];
}

async function settled(id: string): Promise<JobRow> {
  return waitFor(`job ${id} to settle`, async () => {
    const r = await row(id);
    return ['completed', 'failed', 'cancelled'].includes(r.status) ? r : undefined;
  }, 30_000);
}

async function runsOf(id: string): Promise<{ attempt: number; thread_id: number }[]> {
  const { rows } = await db.query<{ attempt: number; thread_id: number }>(`SELECT attempt, thread_id FROM thread_runs WHERE job_id = $1 ORDER BY id`, [id]);
  return rows;
}

/** The job's runs with when each began, and when the sweeper took back the attempt of each (lease-expired), if it did. */
async function runsAndLapses(id: string): Promise<{ attempt: number; started: number; lapsed: number | null }[]> {
  const { rows } = await db.query<{ attempt: number; started_at: Date; lapsed_at: Date | null }>(
    `SELECT r.attempt, r.started_at,
       (SELECT a.finished_at FROM background_job_attempts AS a WHERE a.job_id = r.job_id AND a.attempt = r.attempt AND a.outcome = 'lease-expired') AS lapsed_at
     FROM thread_runs AS r WHERE r.job_id = $1 ORDER BY r.id`,
    [id],
  );
  return rows.map((r) => ({ attempt: r.attempt, started: r.started_at.getTime(), lapsed: r.lapsed_at?.getTime() ?? null }));
}

beforeAll(async () => {
  build = await buildWorker([fileURLToPath(new URL('./threads/late-start-worker.ts', import.meta.url)), fileURLToPath(new URL('./threads/slow-load.thread.ts', import.meta.url)), fileURLToPath(new URL('./threads/thread-db.ts', import.meta.url))]);
  const url = await createTestDatabase('thread_start_deadline');
  db = sqlPool(url);
  app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
  queue = app.get(QueueService);
  await db.query(`CREATE TABLE thread_runs (id bigserial PRIMARY KEY, job_id int8 NOT NULL, attempt int NOT NULL, thread_id int NOT NULL, started_at timestamptz NOT NULL)`);
  const config: LateStartWorkerConfig = {
    url,
    workerId: 'late-start',
    slowLoadMs: SLOW_LOAD_MS,
    queue: { leaseMs: LEASE_MS, heartbeatMs: 200, shutdownGraceMs: 1_000, maintenance: { sweepIntervalMs: 200, pruneIntervalMs: 600_000 } },
  };
  const child = await forkLoaded(build.script, { NODE_OPTIONS: '' }, { stderr: 'pipe' });
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (text: string) => (stderr = (stderr + text).slice(-16_384)));
  worker = await startForked(child, { config });
}, 60_000);

afterAll(async () => {
  worker?.kill('SIGKILL');
  if (stderr) console.log(`the worker's stderr (its last 16 KB):\n${stderr}`);
  await app?.close();
  await db?.end();
  await build?.remove();
});

describe('thread handlers: a job begins on its thread only within its start deadline', () => {
  it('a job whose new thread loads its file for longer than half the lease begins when it has loaded: the heartbeat renewed its deadline', async () => {
    const id = await queue.enqueue('slow', {});
    expect(await settled(id)).toEqual({ status: 'completed', attempts: 1 });
    expect(await runsOf(id)).toEqual([{ attempt: 1, thread_id: expect.any(Number) }]);
  }, 60_000);

  it('a job whose thread becomes ready while its process stalls past half the lease is not begun there; a later attempt runs it, once', async () => {
    const id = await queue.enqueue('slow_stalled', {});
    // Its claim hands it to a new thread, whose file takes SLOW_LOAD_MS to load; then this process stalls.
    await waitFor('the job to be claimed', async () => (await row(id)).status === 'processing', 20_000, 5);
    // One attempt: with the default five, a sweeper that won the race at the stall's end (BLOCK_MS) put it back and it
    // stalled this process again, while the next attempt of `id` ran; that attempt's lease lapsed, and a third ran too.
    await queue.enqueue('block', { ms: BLOCK_MS }, { maxAttempts: 1 });
    const done = await settled(id);
    expect(done.status).toBe('completed');
    // Without the question the thread called the function for attempt 1 during the stall, its lease lapsed.
    const runs = await runsAndLapses(id);
    expect(runs.map((r) => r.attempt)).not.toContain(1);
    // The attempt that completed the job ran, last. Normally it is the only run; on a loaded machine this process may
    // still stop renewing a lease for longer than the lease, and the library then promises only this: each attempt
    // begins at most once, and a later one only after the earlier one's lease lapsed and the sweeper took it back.
    expect(runs.at(-1)!.attempt).toBe(done.attempts);
    for (let i = 1; i < runs.length; i++) {
      expect(runs[i].attempt).toBeGreaterThan(runs[i - 1].attempt);
      expect(runs[i - 1].lapsed).not.toBeNull();
      expect(runs[i - 1].lapsed!).toBeLessThanOrEqual(runs[i].started);
    }
  }, 60_000);
});
