import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './faults/support/build-worker.js';
import { forkLoaded, startForked } from './support/serve-start.js';
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
      const child = await forkLoaded(build.script);
      children.push(child);
      await startForked(child, { url });
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

  // The fan-in the issue names: 10,000 parents of one sink finishing at full speed in three processes. Measured
  // against the same 10,000 jobs without the flow, in the same run: a sample of pg_locks every 10 ms counts the
  // backends waiting for a lock (a hot child row would show as settles queued behind one another). Printed, not
  // asserted: timing belongs to the benchmark; what is asserted is that the sink ran once, after every parent.
  it('a fan-in of 10,000 parents: the sink runs once, after all of them; settles do not queue on the sink', async () => {
    const queue = producer.get(QueueService);
    const measure = async (enqueue: () => Promise<unknown>, done: () => Promise<boolean>) => {
      let maxWaiting = 0;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const { rows } = await db.query(`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted`);
          maxWaiting = Math.max(maxWaiting, rows[0].n);
          await new Promise((r) => setTimeout(r, 10));
        }
      })();
      const t0 = performance.now();
      await enqueue();
      const enqueueMs = Math.round(performance.now() - t0);
      while (!(await done())) await new Promise((r) => setTimeout(r, 20));
      const seconds = (performance.now() - t0) / 1_000;
      sampling = false;
      await sampler;
      return { jobsPerSecond: Math.round(10_000 / seconds), maxWaiting, enqueueMs };
    };
    const parts = Array.from({ length: 10_000 }, (_, n) => ({ ref: `p${n}`, queue: 'fx-part', payload: { n } }));
    let flowId = '';
    const fanIn = await measure(
      async () => (flowId = (await queue.enqueueFlow({ jobs: [...parts, { ref: 'sink', queue: 'fx-sink', payload: {}, dependsOn: parts.map((p) => p.ref) }] })).id),
      async () => (await queue.getFlow(flowId))?.status === 'completed',
    );
    const before = (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE status = 'completed'`)).rows[0].n;
    const plain = await measure(
      () => queue.enqueueMany(parts.map((p) => ({ queue: p.queue, payload: p.payload }))),
      async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE status = 'completed'`)).rows[0].n >= before + 10_000,
    );
    console.log(`fan-in of 10,000 parents over ${WORKERS} processes: ${fanIn.jobsPerSecond} jobs/s (enqueue ${fanIn.enqueueMs} ms of it), at most ${fanIn.maxWaiting} backends waiting on a lock; the same 10,000 jobs without a flow: ${plain.jobsPerSecond} jobs/s (enqueue ${plain.enqueueMs} ms), at most ${plain.maxWaiting}`);

    const sink = (await db.query(`SELECT id, result, locked_at FROM background_jobs WHERE flow_id = $1 AND flow_ref = 'sink'`, [flowId])).rows[0];
    expect(sink.result).toEqual({ parents: 10_000, sum: (9_999 * 10_000) / 2 });
    const late = await db.query(`SELECT max(finished_at) AS last FROM background_jobs WHERE flow_id = $1 AND flow_ref <> 'sink'`, [flowId]);
    expect(sink.locked_at.getTime()).toBeGreaterThanOrEqual(late.rows[0].last.getTime());
    const sinkRuns = await db.query(`SELECT count(*)::int AS n FROM runs WHERE job_id = $1`, [sink.id]);
    expect(sinkRuns.rows[0].n).toBe(1);
  }, 180_000);
});
