import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from '../faults/support/build-worker.js';
import { forkLoaded, startForked } from '../support/serve-start.js';
import { sqlPool, startApp } from '../support/test-app.js';

// Failing flows run by three worker processes with read-ahead (flows/flow-worker.ts; flows-processes.spec.ts runs
// only flows that complete): the last jobs of a failing flow end in different processes at about the same moment,
// so their settles (and second looks) meet on the flow row. Whatever the timing, every completed job is compensated
// by exactly one compensation, run once, and every flow ends compensated (failed when none of its steps completed). (The race itself is pinned down, on two
// connections, by mutations/flows.spec.ts; this is the same promise under real concurrency.) From the tables.
describe('failing flows across processes', () => {
  const WORKERS = 3;
  let build: WorkerBuild;
  const children: ChildProcess[] = [];
  let producer: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    const url = await createTestDatabase('mutations_flows_processes');
    producer = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    db = sqlPool(url);
    await db.query(`CREATE TABLE runs (job_id int8, pid int, started_at timestamptz)`);
    build = await buildWorker([fileURLToPath(new URL('../flows/flow-worker.ts', import.meta.url))]);
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

  it('60 flows of 12 parallel steps, the last of which fails: every completed step compensated once, every flow with one compensated', async () => {
    const queue = producer.get(QueueService);
    const flows = await Promise.all(
      Array.from({ length: 60 }, () =>
        queue.enqueueFlow({
          jobs: Array.from({ length: 12 }, (_, n) => ({
            ref: `s${n}`,
            queue: 'fx-step',
            payload: { n, fail: n === 11 },
            maxAttempts: 1, // stored at the enqueue: this process has no handler of fx-step to take it from
            ...(n === 11 ? {} : { compensate: { queue: 'fx-undo', payload: { n } } }),
          })),
        }),
      ),
    );
    const ids = flows.map((f) => f.id);
    // Compensated, or failed when the failing step ended before any other completed (the rest were cancelled unstarted).
    const ends = new Map<string, string>();
    for (const id of ids) ends.set(id, (await queue.waitForFlow(id, { timeoutMs: 60_000 })).status);
    expect([...ends.values()].filter((s) => s !== 'compensated' && s !== 'failed')).toEqual([]);
    expect([...ends.values()].filter((s) => s === 'compensated').length).toBeGreaterThan(0);
    const { rows: failedWithCompleted } = await db.query(
      `SELECT f.id FROM background_flows AS f WHERE f.id = ANY($1::int8[]) AND f.status = 'failed'
         AND EXISTS (SELECT 1 FROM background_jobs AS j WHERE j.flow_id = f.id AND j.compensates IS NULL AND j.status = 'completed')`,
      [ids],
    );
    expect(failedWithCompleted).toEqual([]);

    // Each completed step has exactly one compensation, and every compensation completed.
    const { rows: steps } = await db.query(
      `SELECT j.id, (SELECT count(*)::int FROM background_jobs AS c WHERE c.compensates = j.id) AS compensations
       FROM background_jobs AS j WHERE j.flow_id = ANY($1::int8[]) AND j.compensates IS NULL AND j.status = 'completed'`,
      [ids],
    );
    expect(steps.length).toBeGreaterThan(0);
    expect(steps.filter((s) => s.compensations !== 1)).toEqual([]);
    const { rows: [comp] } = await db.query(
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE status <> 'completed')::int AS unfinished
       FROM background_jobs WHERE flow_id = ANY($1::int8[]) AND compensates IS NOT NULL`,
      [ids],
    );
    expect(comp).toEqual({ n: steps.length, unfinished: 0 });
    // Every job of these flows ran at most once (cancelled steps never), and the runs were spread over the processes.
    const { rows: twice } = await db.query(
      `SELECT r.job_id FROM runs AS r JOIN background_jobs AS j ON j.id = r.job_id WHERE j.flow_id = ANY($1::int8[]) GROUP BY r.job_id HAVING count(*) > 1`,
      [ids],
    );
    expect(twice).toEqual([]);
    expect((await db.query(`SELECT count(DISTINCT pid)::int AS n FROM runs`)).rows[0].n).toBe(WORKERS);
  }, 120_000);
});
