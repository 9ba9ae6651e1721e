import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './faults/support/build-worker.js';
import { sqlPool, startApp } from './support/test-app.js';

// Flows run by three worker processes at once, each with a read-ahead buffer: the last parents of a fan-in finish in
// different processes at the same moment, which is the race the second look after commit exists for (store/flow.sql.ts).
// This process only enqueues (workers: false). Everything is asserted from the tables.
describe('flows across processes', () => {
  const WORKERS = 3;
  let build: WorkerBuild;
  const children: ChildProcess[] = [];
  let producer: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    const url = await createTestDatabase('flows-processes');
    producer = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    db = sqlPool(url);
    await db.query(`CREATE TABLE runs (job_id int8, pid int, started_at timestamptz)`);
    build = await buildWorker([fileURLToPath(new URL('./flows/flow-worker.ts', import.meta.url))]);
    for (let i = 0; i < WORKERS; i++) {
      const child = fork(build.script, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
      children.push(child);
      await new Promise<void>((resolve, reject) => {
        child.on('message', (m: { type: string }) => {
          if (m.type === 'loaded') child.send({ type: 'start', url });
          if (m.type === 'ready') resolve();
        });
        child.once('exit', (code) => reject(new Error(`worker exited with ${code} before it was ready`)));
      });
    }
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode === null ? once(c, 'exit') : undefined)));
    await producer?.close();
    await db?.end();
    await build?.remove();
  });

  it('runs 30 fan-ins of 60 parents and 30 chains of 8: every flow completes, each job once, no child before its parents, each sink sees all its parents', async () => {
    const queue = producer.get(QueueService);
    const flows: string[] = [];
    const enqueues: Promise<unknown>[] = [];
    for (let f = 0; f < 30; f++) {
      const parts = Array.from({ length: 60 }, (_, n) => ({ ref: `p${n}`, queue: 'fx-part', payload: { n } }));
      enqueues.push(queue.enqueueFlow({ jobs: [...parts, { ref: 'sink', queue: 'fx-sink', payload: {}, dependsOn: parts.map((p) => p.ref) }] }).then((x) => flows.push(x.id)));
      const chain = Array.from({ length: 8 }, (_, n) => ({ ref: `c${n}`, queue: 'fx-part', payload: { n }, dependsOn: n === 0 ? [] : [`c${n - 1}`] }));
      enqueues.push(queue.enqueueFlow({ jobs: chain }).then((x) => flows.push(x.id)));
    }
    await Promise.all(enqueues);
    for (const id of flows) expect((await queue.waitForFlow(id, { timeoutMs: 60_000 })).status).toBe('completed');

    const jobs = (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE flow_id = ANY($1::int8[])`, [flows])).rows[0].n;
    expect(jobs).toBe(30 * 61 + 30 * 8);
    const runs = await db.query(`SELECT job_id, count(*)::int AS n FROM runs GROUP BY job_id`);
    expect(runs.rows.length).toBe(jobs);
    expect(runs.rows.filter((r) => r.n !== 1)).toEqual([]);
    const early = await db.query(
      `SELECT d.child_id FROM background_job_deps AS d JOIN runs AS c ON c.job_id = d.child_id JOIN background_jobs AS p ON p.id = d.parent_id
       WHERE d.flow_id = ANY($1::int8[]) AND (p.finished_at IS NULL OR c.started_at < p.finished_at)`,
      [flows],
    );
    expect(early.rows).toEqual([]);
    const sinks = await db.query(`SELECT result FROM background_jobs WHERE flow_id = ANY($1::int8[]) AND flow_ref = 'sink'`, [flows]);
    expect(sinks.rows.map((r) => r.result)).toEqual(Array(30).fill({ parents: 60, sum: (59 * 60) / 2 }));
    // Parents of one fan-in finished in every process.
    const spread = await db.query(`SELECT count(DISTINCT pid)::int AS n FROM runs`);
    expect(spread.rows[0].n).toBe(WORKERS);
    expect((await db.query(`SELECT count(*)::int AS n FROM background_flows WHERE finished_at IS NULL`)).rows[0].n).toBe(0);
  }, 120_000);
});
