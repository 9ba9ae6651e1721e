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
import type { ThreadWorkerConfig } from './threads/thread-worker.js';

// Thread handlers (`thread: { file, poolSize }`), run by two OS processes built from the library's source (the thread
// entry runs from compiled JavaScript), asserted from what the tables hold: the jobs' rows, the runs the thread file
// recorded on its own connection (thread_runs, with the thread's id) and the starts of a plain queue (quick_runs).
// Fair to the specs beside it under `npm test` (two Jest workers, 2 cores): the thread file lowers its threads'
// priority (the main threads keep theirs), the longest burn is 3.5 leases, and the workers' stderr is read here, not
// passed to the Jest worker's (forkLoaded: jest-worker takes an out-of-memory text there for its own crash).

const TABLES = `
  CREATE TABLE thread_runs (id bigserial PRIMARY KEY, job_id int8 NOT NULL, queue text NOT NULL, attempt int NOT NULL, thread_id int NOT NULL,
    pid int NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz);
  CREATE TABLE quick_runs (job_id int8 PRIMARY KEY, worker int NOT NULL, started_at timestamptz NOT NULL);`;

/** The burn that must outlive the lease: 3.5 leases, time for the lease to lapse and the other process to take the job were the heartbeat stopped. */
const LEASE_MS = 2_000;
const LONG_BURN_MS = 7_000;

let build: WorkerBuild;
let db: pg.Pool;
let app: INestApplicationContext;
let queue: QueueService;
const workers: ChildProcess[] = [];
/** The last of each worker's stderr (its logged errors), shown once the spec is over. */
const stderrTails = new Map<string, string>();

interface JobRow {
  status: string;
  attempts: number;
  last_error: string | null;
  result: unknown;
  progress: unknown;
}

async function row(id: string): Promise<JobRow> {
  const { rows } = await db.query<JobRow>(`SELECT status, attempts, last_error, result, progress FROM background_jobs WHERE id = $1`, [id]);
  return rows[0];
}

async function settled(id: string, timeoutMs = 20_000): Promise<JobRow> {
  return waitFor(`job ${id} to settle`, async () => {
    const r = await row(id);
    return ['completed', 'failed', 'cancelled'].includes(r.status) ? r : undefined;
  }, timeoutMs);
}

async function runsOf(id: string): Promise<{ thread_id: number; pid: number; ended: boolean }[]> {
  const { rows } = await db.query<{ thread_id: number; pid: number; ended: boolean }>(
    `SELECT thread_id, pid, ended_at IS NOT NULL AS ended FROM thread_runs WHERE job_id = $1 ORDER BY id`,
    [id],
  );
  return rows;
}

/** The failing queues' jobs get one attempt (stored on the row at enqueue: this app runs no handler that would say so). */
async function enqueue(q: string, payload: object): Promise<string> {
  return queue.enqueue(q, payload, q === 'cpu' || q === 'quick' ? {} : { maxAttempts: 1 });
}

beforeAll(async () => {
  build = await buildWorker([fileURLToPath(new URL('./threads/thread-worker.ts', import.meta.url)), fileURLToPath(new URL('./threads/cpu.thread.ts', import.meta.url)), fileURLToPath(new URL('./threads/thread-db.ts', import.meta.url))]);
  const url = await createTestDatabase('threads');
  db = sqlPool(url);
  app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
  queue = app.get(QueueService);
  await db.query(TABLES);
  const env = { NODE_OPTIONS: '' }; // Jest's --experimental-vm-modules is not for the workers
  const config = (workerId: string): ThreadWorkerConfig => ({
    url,
    workerId,
    // A 2 s lease: a handler blocking the event loop for 7 s would lose it, and the sweeper (every 200 ms) would give the job to the other process.
    queue: { leaseMs: LEASE_MS, heartbeatMs: 500, shutdownGraceMs: 1_000, maintenance: { sweepIntervalMs: 200, pruneIntervalMs: 600_000 } },
  });
  for (const id of ['t1', 't2']) {
    const child = await forkLoaded(build.script, env, { stderr: 'pipe' });
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (text: string) => stderrTails.set(id, ((stderrTails.get(id) ?? '') + text).slice(-16_384)));
    workers.push(await startForked(child, { config: config(id) }));
  }
}, 60_000);

afterAll(async () => {
  for (const w of workers) w.kill('SIGKILL');
  for (const [id, text] of stderrTails) console.log(`worker ${id}'s stderr (its last 16 KB):\n${text}`);
  await app?.close();
  await db?.end();
  await build?.remove();
});

describe('thread handlers (two OS processes)', () => {
  it('a CPU-bound job of 3.5 leases (leaseMs 2000) runs once and completes, its lease kept, while another queue keeps starting its jobs at its usual latency', async () => {
    const delays = async (ids: string[]) => {
      const { rows } = await db.query<{ ms: number }>(
        `SELECT (extract(epoch FROM q.started_at - j.run_at) * 1000)::float8 AS ms FROM quick_runs AS q JOIN background_jobs AS j ON j.id = q.job_id WHERE q.job_id = ANY($1::int8[])`,
        [ids],
      );
      return rows.map((r) => r.ms).sort((a, b) => a - b);
    };
    const quickWave = async (count: number) => {
      const ids: string[] = [];
      for (let i = 0; i < count; i++) {
        ids.push(await enqueue('quick', { i }));
        await new Promise((r) => setTimeout(r, 150));
      }
      await waitFor('the quick jobs to start', async () => (await delays(ids)).length === ids.length);
      return delays(ids);
    };
    const before = await quickWave(10);
    const id = await enqueue('cpu', { burnMs: LONG_BURN_MS });
    await waitFor('the CPU job to start', async () => (await runsOf(id)).length === 1);
    const during = await quickWave(25); // about 4 s of the 7 s burn
    // Twice the lease after the thread started: the lease the claim took has lapsed, so one still in the future was renewed.
    const lease = await waitFor('two leases into the burn', async () => {
      const { rows } = await db.query<{ status: string; held: boolean; attempts: number; runs: number; since: number }>(
        `SELECT j.status::text, j.lease_expires_at > now() AS held, j.attempts, (SELECT count(*)::int FROM thread_runs WHERE job_id = j.id) AS runs,
           (extract(epoch FROM now() - r.started_at) * 1000)::float8 AS since
         FROM background_jobs AS j JOIN thread_runs AS r ON r.job_id = j.id WHERE j.id = $1 ORDER BY r.id LIMIT 1`,
        [id],
      );
      return rows[0].since > 2 * LEASE_MS ? rows[0] : undefined;
    });
    expect(lease).toMatchObject({ status: 'processing', held: true, attempts: 1, runs: 1 });
    const done = await settled(id, 30_000);
    expect(done.status).toBe('completed');
    expect(done.attempts).toBe(1);
    expect(done.result).toMatchObject({ burned: LONG_BURN_MS });
    // Once: with the heartbeat stopped, the sweeper would have put the job back and the other process run it again.
    expect(await runsOf(id)).toHaveLength(1);
    // The usual latency (before) is tens of ms; a handler on the event loop would have delayed them by seconds.
    const p = (xs: number[], q: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * q))];
    const ms = (x: number) => Math.round(x);
    console.log(
      `quick queue, enqueue to start: before the burn p50 ${ms(p(before, 0.5))} ms, max ${ms(before[before.length - 1])} ms; during it p50 ${ms(p(during, 0.5))} ms, ` +
        `max ${ms(during[during.length - 1])} ms; the lease still held ${ms(lease.since)} ms into the burn`,
    );
    expect(p(during, 0.5)).toBeLessThan(Math.max(200, 4 * p(before, 0.5)));
    expect(during[during.length - 1]).toBeLessThan(1_500);
  }, 60_000);

  it('cancel aborts the thread, terminates it after the grace, and the next job runs on a new thread', async () => {
    const id = await enqueue('cpu_cancel', { burnMs: 30_000 });
    await waitFor('the job to start', async () => (await runsOf(id)).length === 1);
    expect(await queue.cancel(id)).toBe('cancelled');
    expect((await settled(id)).status).toBe('cancelled');
    const next = await enqueue('cpu_cancel', { burnMs: 20 });
    const after = await settled(next);
    expect(after.status).toBe('completed');
    const [killed] = await runsOf(id);
    const [ran] = await runsOf(next);
    expect(killed.ended).toBe(false); // terminated mid-loop
    if (ran.pid === killed.pid) expect(ran.thread_id).not.toBe(killed.thread_id); // replaced, not reused
  });

  it('timeoutMs fails the attempt, the thread is replaced, the next job runs', async () => {
    const id = await enqueue('cpu_timeout', { burnMs: 30_000 });
    const r = await settled(id);
    expect(r.status).toBe('failed');
    expect(r.last_error).toMatch(/timed out after 2000 ms/);
    const next = await enqueue('cpu_timeout', { burnMs: 20 });
    expect((await settled(next)).status).toBe('completed');
    const [killed] = await runsOf(id);
    const [ran] = await runsOf(next);
    if (ran.pid === killed.pid) expect(ran.thread_id).not.toBe(killed.thread_id);
  });

  it('a CPU-bound loop that checks job.signal.aborted stops at the abort and keeps its thread', async () => {
    // Two jobs at once: one on each process's only thread of this queue, so the next job's thread can be compared.
    const ids = await Promise.all([0, 1].map(() => enqueue('cpu_coop', { burnMs: 30_000, cooperative: true })));
    for (const id of ids) expect((await settled(id)).last_error).toMatch(/timed out after 2000 ms/);
    const next = await Promise.all([0, 1].map(() => enqueue('cpu_coop', { burnMs: 20 })));
    for (const id of next) expect((await settled(id)).status).toBe('completed');
    const threadOf = new Map((await Promise.all(ids.map(runsOf))).map(([r]) => [r.pid, r.thread_id]));
    const after = (await Promise.all(next.map(runsOf))).map(([r]) => r).filter((r) => threadOf.has(r.pid));
    // The threads stopped within the grace: a next job on the same process ran on the same thread, not a new one.
    expect(after.length).toBeGreaterThan(0);
    for (const r of after) expect(r.thread_id).toBe(threadOf.get(r.pid));
  });

  it.each([
    ['process.exit in the thread', { exitCode: 3 }, /its thread exited with code 3/],
    ['an uncaught error in the thread', { uncaught: true }, /its thread crashed: RangeError: uncaught in the thread/],
    ['out of memory under resourceLimits', { oom: true, record: false }, /its thread ran out of memory: stopped at its heap limit \(ERR_WORKER_OUT_OF_MEMORY; resourceLimits \{"maxOldGenerationSizeMb":64\}\)/],
  ])('%s fails the attempt readably and the next job still runs', async (_what, payload, expected) => {
    const id = await enqueue('cpu_crash', payload);
    const r = await settled(id, 30_000);
    expect(r.status).toBe('failed');
    expect(r.last_error).toMatch(expected);
    const next = await enqueue('cpu_crash', { burnMs: 10 });
    expect((await settled(next)).status).toBe('completed');
  }, 40_000);

  it.each([
    ['a thrown Error keeps its name, message and stack', { throwError: true }, /TypeError: bad pixels in job \d+/],
    ['a thrown non-Error gives a readable last_error', { throwValue: { code: 42, why: 'no' } }, /threw a non-Error value: \{ (code: 42, why: 'no'|why: 'no', code: 42) \}/],
    ['a thrown string', { throwValue: 'plain text' }, /threw a non-Error value: 'plain text'/],
    ['a function in the result fails the attempt', { returnFunction: true }, /result cannot be sent to the main thread \(structured clone\)/],
  ])('%s', async (_what, payload, expected) => {
    const id = await enqueue('cpu_crash', payload);
    const r = await settled(id);
    expect(r.status).toBe('failed');
    expect(r.last_error).toMatch(expected);
  });

  it("the thread's stack comes back with the error", async () => {
    const id = await enqueue('cpu_crash', { throwError: true });
    expect((await settled(id)).last_error).toMatch(/TypeError: bad pixels[\s\S]*cpu\.thread\.js/);
  });

  it('progress from the thread is written by the main thread', async () => {
    const id = await enqueue('cpu', { progress: 42, burnMs: 1_500 });
    await waitFor('the progress to be written', async () => (await row(id)).progress === 42);
    expect((await settled(id)).status).toBe('completed');
  });

  it('job.log() from the thread is stored with the attempt, in order, lines logged after a CPU-bound loop too', async () => {
    const id = await enqueue('cpu', { logs: ['resizing <b>1</b>', { width: 3 }, 'done'], burnMs: 300 });
    expect((await settled(id)).status).toBe('completed');
    const { rows } = await db.query<{ logs: { lines: { attempt: number; line: string }[]; total: number } }>(`SELECT logs FROM background_jobs WHERE id = $1`, [id]);
    expect(rows[0].logs.lines.map((l) => [l.attempt, l.line])).toEqual([[1, 'resizing <b>1</b>'], [1, '{ width: 3 }'], [1, 'done']]);
    expect(rows[0].logs.total).toBe(3);
  });

  it('two processes with thread handlers run each job once', async () => {
    const ids = (await queue.enqueueMany(Array.from({ length: 16 }, (_, i) => ({ queue: 'cpu', payload: { burnMs: 20 + (i % 4) * 10 } }))));
    for (const id of ids) expect((await settled(id)).status).toBe('completed');
    const { rows } = await db.query<{ runs: number; pids: number; attempts: number }>(
      `SELECT count(r.id)::int AS runs, count(DISTINCT r.pid)::int AS pids, max(j.attempts)::int AS attempts
       FROM background_jobs AS j LEFT JOIN thread_runs AS r ON r.job_id = j.id WHERE j.id = ANY($1::int8[]) GROUP BY j.id`,
      [ids],
    );
    expect(rows.every((r) => r.runs === 1 && r.attempts === 1)).toBe(true);
    const { rows: by } = await db.query<{ n: number }>(`SELECT count(DISTINCT pid)::int AS n FROM thread_runs WHERE job_id = ANY($1::int8[])`, [ids]);
    expect(by[0].n).toBe(2);
  }, 40_000);

  // Last: it stops one of the two processes.
  it('shutdown: the grace is honoured, then the thread is terminated and its job put back', async () => {
    const id = await enqueue('cpu_cancel', { burnMs: 30_000 });
    await waitFor('the job to start', async () => (await runsOf(id)).length === 1);
    const [run] = await runsOf(id);
    const holder = workers.find((w) => w.pid === run.pid)!;
    const exited = new Promise<number>((resolve) => holder.once('exit', () => resolve(Date.now())));
    const from = Date.now();
    holder.kill('SIGTERM');
    const at = await exited;
    workers.splice(workers.indexOf(holder), 1);
    // shutdownGraceMs 1000: the app waited for the job that long, aborted it, put it back, and closed the pool.
    expect(at - from).toBeGreaterThanOrEqual(1_000);
    expect(at - from).toBeLessThan(8_000);
    // Put back without charging the attempt: pending, or taken already by the other process (a second run, attempt 1 again).
    await waitFor('the job to be put back', async () => (await row(id)).status === 'pending' || (await runsOf(id)).length === 2);
    expect((await row(id)).attempts).toBeLessThanOrEqual(1);
    expect(await queue.cancel(id)).toBe('cancelled');
  }, 30_000);
});
