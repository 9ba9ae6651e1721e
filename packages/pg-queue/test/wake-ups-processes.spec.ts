import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './faults/support/build-worker.js';
import { sqlPool, waitFor } from './support/test-app.js';

// Deferred wake-ups across OS processes: two producer processes enqueue through QueueService with 8 concurrent
// callers each (16 enqueuers, one job per transaction) while two worker processes run the jobs. The workers
// poll once a minute, so every start within the test's deadlines came from a NOTIFY the producers' wake
// senders sent after their inserts committed.
describe('deferred wake-ups across processes', () => {
  let build: WorkerBuild;
  let db: pg.Pool;
  const children: ChildProcess[] = [];
  const producers: ChildProcess[] = [];

  async function spawn(url: string, role: 'worker' | 'producer'): Promise<ChildProcess> {
    const child = fork(build.script, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      child.on('message', (m: { type: string }) => {
        if (m.type === 'loaded') child.send({ type: 'start', url, role });
        if (m.type === 'ready') resolve();
      });
      child.once('exit', (code) => reject(new Error(`${role} exited with ${code} before it was ready`)));
    });
    return child;
  }

  function enqueue(producer: ChildProcess, jobs: number, callers: number): Promise<string[]> {
    return new Promise((resolve, reject) => {
      const onMessage = (m: { type: string; ids?: string[]; error?: string }) => {
        if (m.type !== 'enqueued') return;
        producer.off('message', onMessage);
        if (m.error) reject(new Error(m.error));
        else resolve(m.ids!);
      };
      producer.on('message', onMessage);
      producer.send({ type: 'enqueue', jobs, callers });
    });
  }

  async function idle(): Promise<void> {
    await waitFor('every job finished', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE status <> 'completed'`)).rows[0].n === 0, 30_000, 50);
  }

  beforeAll(async () => {
    const url = await createTestDatabase('wake_processes');
    db = sqlPool(url);
    await db.query(`CREATE TABLE wake_runs (job_id bigint NOT NULL, pid int NOT NULL, started_at timestamptz NOT NULL DEFAULT clock_timestamp())`);
    build = await buildWorker([fileURLToPath(new URL('./waking/wake-process.ts', import.meta.url))]);
    // The first process migrates; the others find the schema ready.
    await spawn(url, 'worker');
    await Promise.all([spawn(url, 'worker'), ...[0, 1].map(async () => producers.push(await spawn(url, 'producer')))]);
    await waitFor('both workers LISTEN', async () => {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'nestjs-pg-queue listener' AND datname = current_database()`);
      return rows[0].n === 2;
    });
  });
  afterAll(async () => {
    for (const child of children) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
    await db?.end();
    await build?.remove();
  });

  it('16 concurrent enqueuers in two processes, two worker processes: every job runs exactly once, none waits for the poll', async () => {
    const ids = (await Promise.all(producers.map((p) => enqueue(p, 400, 8)))).flat();
    expect(ids).toHaveLength(800);
    expect(new Set(ids).size).toBe(800);
    await idle();
    const { rows } = await db.query(`
      SELECT count(*)::int AS runs, count(DISTINCT r.job_id)::int AS jobs, count(*) FILTER (WHERE j.id IS NULL)::int AS strangers,
             count(DISTINCT r.pid)::int AS workers
      FROM wake_runs AS r LEFT JOIN background_jobs AS j ON j.id = r.job_id`);
    expect(rows[0]).toMatchObject({ runs: 800, jobs: 800, strangers: 0 });
    const { rows: attempts } = await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE attempts <> 1`);
    expect(attempts[0].n).toBe(0);
  });

  it('a job enqueued while every worker is idle starts at once, not at the next poll (a minute)', async () => {
    await idle();
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      const [id] = await enqueue(producers[i % 2], 1, 1);
      const started = await waitFor(`job ${id} started`, async () => {
        const { rows } = await db.query<{ ms: number }>(
          `SELECT (extract(epoch FROM r.started_at - j.created_at) * 1000)::float8 AS ms FROM wake_runs r JOIN background_jobs j ON j.id = r.job_id WHERE r.job_id = $1`,
          [id],
        );
        return rows[0]?.ms;
      }, 30_000, 5);
      waits.push(started);
    }
    // By the database clock, insert to handler start; the poll would have taken up to 60,000 ms.
    for (const ms of waits) expect(ms).toBeLessThan(10_000);
  });
});
