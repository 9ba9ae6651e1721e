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

// Issue 39, item 11, across processes: splitters in two worker processes (read-ahead on) spawn children with unique
// keys the other process's splitters spawn too, and those children hold the keys for a few ms. A held key must never
// refuse a splitter's completion: spawn() refuses the call (the handler counts it), or, when the key is taken between
// spawn() and the completion, the child is a duplicate that is not created. Everything is asserted from the tables.
describe('job.spawn() of children whose unique keys other processes hold', () => {
  const WORKERS = 2;
  const FLOWS = 40;
  const KEYS_PER_SPLIT = 4;
  let build: WorkerBuild;
  const children: ChildProcess[] = [];
  let producer: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    const url = await createTestDatabase('flows-spawn-keys');
    producer = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    db = sqlPool(url);
    await db.query(`CREATE TABLE fk_runs (job_id int8, pid int, at timestamptz DEFAULT clock_timestamp())`);
    build = await buildWorker([fileURLToPath(new URL('./flows/spawn-keys-worker.ts', import.meta.url))]);
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

  it('every splitter completes on its first attempt, no flow fails, every child created runs once; keys were refused or duplicated along the way', async () => {
    const queue = producer.get(QueueService);
    const keys = ['s0', 's1', 's2', 's3', 's4', 's5'];
    const flows = await Promise.all(
      Array.from({ length: FLOWS }, (_, f) =>
        queue.enqueueFlow({
          jobs: [{ ref: 'split', queue: 'fk-split', payload: { keys: Array.from({ length: KEYS_PER_SPLIT }, (_, k) => keys[(f + k) % keys.length]), holdMs: 10 + (f % 5) * 10 } }],
        }),
      ),
    );
    const ids = flows.map((f) => f.id);
    for (const id of ids) expect((await queue.waitForFlow(id, { timeoutMs: 60_000 })).status).toBe('completed');

    const splits = await db.query(`SELECT id, status::text, attempts, last_error, result FROM background_jobs WHERE flow_id = ANY($1::int8[]) AND flow_ref = 'split'`, [ids]);
    expect(splits.rows.filter((r) => r.status !== 'completed' || r.attempts !== 1 || r.last_error !== null)).toEqual([]);
    const splitRuns = await db.query(`SELECT r.job_id, count(*)::int AS n FROM fk_runs AS r JOIN background_jobs AS j ON j.id = r.job_id WHERE j.flow_ref = 'split' GROUP BY 1`);
    expect(splitRuns.rows.length).toBe(FLOWS);
    expect(splitRuns.rows.filter((r) => r.n !== 1)).toEqual([]);

    // Every job of every flow completed, each ran once; nothing failed anywhere.
    const jobs = await db.query(`SELECT j.id, j.status::text, (SELECT count(*)::int FROM fk_runs AS r WHERE r.job_id = j.id) AS runs FROM background_jobs AS j WHERE j.flow_id = ANY($1::int8[])`, [ids]);
    expect(jobs.rows.filter((r) => r.status !== 'completed' || r.runs !== 1)).toEqual([]);
    expect((await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE status IN ('failed', 'processing', 'queued', 'blocked')`)).rows[0].n).toBe(0);

    // Each spawn call either created its key's child (and dependent), was refused at spawn(), or lost its key child as
    // a duplicate at the completion (its dependent created without it).
    const refused = splits.rows.reduce((sum, r) => sum + (r.result as { refused: number }).refused, 0);
    const keyed = (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE flow_id = ANY($1::int8[]) AND flow_ref LIKE 'split/k-%'`, [ids])).rows[0].n;
    const after = (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE flow_id = ANY($1::int8[]) AND flow_ref LIKE 'split/after-%'`, [ids])).rows[0].n;
    expect(after + refused).toBe(FLOWS * KEYS_PER_SPLIT);
    const duplicates = after - keyed;
    expect(duplicates).toBeGreaterThanOrEqual(0);
    expect(refused + duplicates).toBeGreaterThan(0);
    // A dependent of a duplicate has no edge (it did not wait); every other dependent waited for its key child.
    const edges = (await db.query(`SELECT count(*)::int AS n FROM background_job_deps WHERE flow_id = ANY($1::int8[])`, [ids])).rows[0].n;
    expect(edges).toBe(keyed);
    const early = await db.query(
      `SELECT d.child_id FROM background_job_deps AS d JOIN fk_runs AS c ON c.job_id = d.child_id JOIN background_jobs AS p ON p.id = d.parent_id
       WHERE d.flow_id = ANY($1::int8[]) AND c.at < p.finished_at`,
      [ids],
    );
    expect(early.rows).toEqual([]);
    const pids = await db.query(`SELECT count(DISTINCT r.pid)::int AS n FROM fk_runs AS r JOIN background_jobs AS j ON j.id = r.job_id WHERE j.flow_ref = 'split'`);
    expect(pids.rows[0].n).toBe(WORKERS);
    process.stdout.write(`spawn keys across processes: ${refused} spawn call(s) refused at spawn(), ${duplicates} child(ren) duplicates at completion, ${keyed} created\n`);
  }, 120_000);
});
