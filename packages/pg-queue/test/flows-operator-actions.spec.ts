// Issue 39, items 11-14: a spawned child whose unique key is held, and operator actions on finished flows (retry of a
// job whose parent failed, retry after retention, retry of a failed compensation), asserted from the tables.
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { JobHandler, PgQueueError, QueueService, type Job } from 'nestjs-pg-queue';
import { MaintenanceScheduler } from '../src/internal.js';
import { AdminStore } from '../src/store/admin.store.js';
import type pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, useTestApp, waitFor } from './support/test-app.js';

const DAY = 86_400_000;

interface Step {
  tag: string;
  fail?: boolean;
}

@Injectable()
class Handlers {
  @JobHandler('foa-step', { maxAttempts: 1 })
  async step(job: Job<Step>) {
    await t.db.query(`INSERT INTO runs (job_id, tag) VALUES ($1, $2)`, [job.id, job.payload.tag]);
    if (job.payload.fail) throw new Error(`${job.payload.tag} refused`);
    const parents = await job.parents();
    return { tag: job.payload.tag, parents: parents.map((p) => ({ ref: p.ref, status: p.status })) };
  }

  @JobHandler('foa-undo', { maxAttempts: 1 })
  async undo(job: Job<Step>) {
    await t.db.query(`INSERT INTO runs (job_id, tag) VALUES ($1, $2)`, [job.id, job.payload.tag]);
    if (job.payload.fail) throw new Error(`${job.payload.tag} refused`);
  }

  /** Runs once its gate (a row of `gates` named by its tag) is open, then fails or returns as foa-step does. */
  @JobHandler('foa-gate', { maxAttempts: 1 })
  async gate(job: Job<Step>) {
    await t.db.query(`INSERT INTO runs (job_id, tag) VALUES ($1, $2)`, [job.id, job.payload.tag]);
    while (!(await t.db.query(`SELECT 1 FROM gates WHERE tag = $1`, [job.payload.tag])).rowCount) await new Promise((r) => setTimeout(r, 50));
    if (job.payload.fail) throw new Error(`${job.payload.tag} refused`);
    return { tag: job.payload.tag };
  }

  /** Spawns a child whose unique key another job holds, catches the refusal, and spawns a plain child instead. */
  @JobHandler('foa-spawn-held', { maxAttempts: 3 })
  async spawnHeld(job: Job<{ key: string }>) {
    await t.db.query(`INSERT INTO runs (job_id, tag) VALUES ($1, 'spawn-held')`, [job.id]);
    let refused: string | undefined;
    try {
      await job.spawn([{ ref: 'dup', queue: 'foa-hold', payload: {}, uniqueKey: job.payload.key }]);
    } catch (error) {
      if (!(error instanceof PgQueueError)) throw error;
      refused = error.message;
    }
    await job.spawn([{ ref: 'plain', queue: 'foa-step', payload: { tag: 'held-plain' } }]);
    return { refused };
  }

  /** spawn() finds the key free; another connection takes it before the completion is written. */
  @JobHandler('foa-spawn-race', { maxAttempts: 3 })
  async spawnRace(job: Job<{ key: string }>) {
    await t.db.query(`INSERT INTO runs (job_id, tag) VALUES ($1, 'spawn-race')`, [job.id]);
    await job.spawn([
      { ref: 'dup', queue: 'foa-hold', payload: {}, uniqueKey: job.payload.key },
      { ref: 'after', queue: 'foa-step', payload: { tag: 'race-after' }, dependsOn: ['dup'] },
      { ref: 'free', queue: 'foa-step', payload: { tag: 'race-free' } },
    ]);
    await t.db.query(`INSERT INTO background_jobs (queue_name, unique_key) VALUES ('foa-hold', $1)`, [job.payload.key]);
  }
}

const t = useTestApp(
  'flowsops',
  { providers: [Handlers], queue: { maintenance: { enabled: false, completedRetentionMs: DAY, failedRetentionMs: 7 * DAY } } },
  async (db) => {
    await db.query(`CREATE TABLE runs (job_id int8, tag text, at timestamptz DEFAULT clock_timestamp())`);
    await db.query(`CREATE TABLE gates (tag text PRIMARY KEY)`);
  },
);

const queue = () => t.app.get(QueueService);
const jobRow = async (id: string) =>
  (await t.db.query(`SELECT id::text, flow_ref AS ref, status::text, attempts, last_error, result FROM background_jobs WHERE id = $1`, [id])).rows[0];
const flowJobs = async (flowId: string) =>
  (await t.db.query(`SELECT id::text, flow_ref AS ref, status::text, attempts, last_error FROM background_jobs WHERE flow_id = $1 ORDER BY flow_ref`, [flowId])).rows;
const flowRow = async (flowId: string) => (await t.db.query(`SELECT status, finished_at FROM background_flows WHERE id = $1`, [flowId])).rows[0];
const runs = async (tag: string) => (await t.db.query(`SELECT count(*)::int AS n FROM runs WHERE tag = $1`, [tag])).rows[0].n;
/** Waits (a few seconds at most) for the flow to reach one of `statuses` in its row. */
const flowReaches = (flowId: string, statuses: string[], timeoutMs = 8_000) =>
  waitFor(`flow ${flowId} to be ${statuses.join(' or ')}`, async () => statuses.includes((await flowRow(flowId))?.status) && (await flowRow(flowId)), timeoutMs);

describe('item 11: job.spawn() of a child whose uniqueKey is held', () => {
  it('spawn() refuses the child, naming it and the holder; the handler goes on and its job completes once', async () => {
    const holder = await queue().enqueue('foa-hold', {}, { uniqueKey: 'held-1' });
    const flow = await queue().enqueueFlow({ jobs: [{ ref: 'split', queue: 'foa-spawn-held', payload: { key: 'held-1' } }] });
    await flowReaches(flow.id, ['completed', 'failed']);
    const split = await jobRow(flow.jobs.split);
    expect([split.status, split.attempts]).toEqual(['completed', 1]);
    expect((split.result as { refused: string }).refused).toBe(
      `job ${flow.jobs.split} (foa-spawn-held): spawn: job "dup" (queue "foa-hold", uniqueKey "held-1"): job ${holder} holds the key; nothing of this spawn call was recorded (catch the error to complete without it).`,
    );
    expect((await flowJobs(flow.id)).map((j) => [j.ref, j.status])).toEqual([
      ['split', 'completed'],
      ['split/plain', 'completed'],
    ]);
    expect((await flowRow(flow.id)).status).toBe('completed');
    expect(await runs('spawn-held')).toBe(1);
    expect((await jobRow(holder)).status).toBe('queued');
  });

  it('a key taken between spawn() and the completion: the parent completes once, the child is a duplicate, its dependent does not wait for it', async () => {
    const flow = await queue().enqueueFlow({ jobs: [{ ref: 'split', queue: 'foa-spawn-race', payload: { key: 'race-1' } }] });
    await flowReaches(flow.id, ['completed', 'failed']);
    const split = await jobRow(flow.jobs.split);
    expect([split.status, split.attempts, split.last_error]).toEqual(['completed', 1, null]);
    expect(await runs('spawn-race')).toBe(1);
    // No child holds the key: the other connection's job does, alone.
    const holders = (await t.db.query(`SELECT flow_id FROM background_jobs WHERE queue_name = 'foa-hold' AND unique_key = 'race-1'`)).rows;
    expect(holders).toEqual([{ flow_id: null }]);
    expect((await flowJobs(flow.id)).map((j) => [j.ref, j.status])).toEqual([
      ['split', 'completed'],
      ['split/after', 'completed'],
      ['split/free', 'completed'],
    ]);
    expect((await t.db.query(`SELECT count(*)::int AS n FROM background_job_deps WHERE flow_id = $1`, [flow.id])).rows[0].n).toBe(0);
    expect((await flowRow(flow.id)).status).toBe('completed');
    expect([await runs('race-after'), await runs('race-free')]).toEqual([1, 1]);
  });
});

describe('item 12: retry of a job that failed because its parent failed', () => {
  it('is refused naming the parent (retry(), and skipped by the bulk retry of the CLI and the dashboard); retry of the parent brings it back and it runs after it', async () => {
    const flow = await queue().enqueueFlow({
      jobs: [
        { ref: 'a', queue: 'foa-step', payload: { tag: 'r12-a', fail: true } },
        { ref: 'b', queue: 'foa-step', payload: { tag: 'r12-b' }, dependsOn: ['a'] },
      ],
    });
    await flowReaches(flow.id, ['failed']);
    expect((await flowJobs(flow.id)).map((j) => [j.ref, j.status])).toEqual([
      ['a', 'failed'],
      ['b', 'failed'],
    ]);
    await expect(queue().retry(flow.jobs.b)).rejects.toThrow(
      `Cannot retry job ${flow.jobs.b}: its parent job ${flow.jobs.a} (a) is failed, not completed; retry the parent`,
    );
    const bulk = await new AdminStore(t.db).bulkBatch('retry', { ids: [flow.jobs.b], statuses: ['failed', 'cancelled'] }, '0', 100);
    expect([bulk.changed, bulk.waiting]).toEqual([0, [{ id: flow.jobs.b, parent: flow.jobs.a }]]);
    // The statement changed nothing (its answer above): the row still says failed, with nothing queued to run it.
    expect((await jobRow(flow.jobs.b)).status).toBe('failed');
    expect((await flowRow(flow.id)).status).toBe('failed');
    expect(await runs('r12-b')).toBe(0);

    await t.db.query(`UPDATE background_jobs SET payload = '{"tag":"r12-a"}' WHERE id = $1`, [flow.jobs.a]);
    expect(await queue().retry(flow.jobs.a)).toBe(true);
    await flowReaches(flow.id, ['completed']);
    expect((await flowJobs(flow.id)).map((j) => [j.ref, j.status])).toEqual([
      ['a', 'completed'],
      ['b', 'completed'],
    ]);
    const order = (await t.db.query(`SELECT tag FROM runs WHERE tag IN ('r12-a', 'r12-b') ORDER BY at`)).rows.map((r) => r.tag);
    expect(order).toEqual(['r12-a', 'r12-a', 'r12-b']);
  });
  it('a bulk retry of the parent and the job together: the parent is retried, the job comes back blocked with it and runs after it', async () => {
    const flow = await queue().enqueueFlow({
      jobs: [
        { ref: 'a', queue: 'foa-step', payload: { tag: 'r12b-a', fail: true } },
        { ref: 'b', queue: 'foa-step', payload: { tag: 'r12b-b' }, dependsOn: ['a'] },
      ],
    });
    await flowReaches(flow.id, ['failed']);
    await t.db.query(`UPDATE background_jobs SET payload = '{"tag":"r12b-a"}' WHERE id = $1`, [flow.jobs.a]);
    const bulk = await new AdminStore(t.db).bulkBatch('retry', { ids: [flow.jobs.a, flow.jobs.b], statuses: ['failed', 'cancelled'] }, '0', 100);
    expect([bulk.changed, bulk.waiting]).toEqual([1, [{ id: flow.jobs.b, parent: flow.jobs.a }]]);
    await flowReaches(flow.id, ['completed']);
    const order = (await t.db.query(`SELECT tag FROM runs WHERE tag IN ('r12b-a', 'r12b-b') ORDER BY at`)).rows.map((r) => r.tag);
    expect(order).toEqual(['r12b-a', 'r12b-a', 'r12b-b']);
  });
});

describe('item 13: retry of a failed flow after completedRetentionMs', () => {
  it("the pruner keeps a failed flow's completed jobs as long as its failed ones, then deletes them together; a retry finds its parents", async () => {
    const flow = await queue().enqueueFlow({
      jobs: [
        { ref: 'a', queue: 'foa-step', payload: { tag: 'r13-a' } },
        { ref: 'b', queue: 'foa-step', payload: { tag: 'r13-b', fail: true }, dependsOn: ['a'] },
        { ref: 'c', queue: 'foa-step', payload: { tag: 'r13-c' }, dependsOn: ['b'] },
      ],
    });
    await flowReaches(flow.id, ['failed']);
    // Two days ago: past completedRetentionMs (1 day), within failedRetentionMs (7 days).
    await t.db.query(`UPDATE background_jobs SET finished_at = now() - interval '2 days' WHERE flow_id = $1`, [flow.id]);
    await t.db.query(`UPDATE background_flows SET finished_at = now() - interval '2 days' WHERE id = $1`, [flow.id]);
    await t.app.get(MaintenanceScheduler).pruner.runOnce();
    expect((await flowJobs(flow.id)).map((j) => [j.ref, j.status])).toEqual([
      ['a', 'completed'],
      ['b', 'failed'],
      ['c', 'failed'],
    ]);

    await t.db.query(`UPDATE background_jobs SET payload = '{"tag":"r13-b"}' WHERE id = $1`, [flow.jobs.b]);
    expect(await queue().retry(flow.jobs.b)).toBe(true);
    await flowReaches(flow.id, ['completed']);
    expect((await jobRow(flow.jobs.b)).result).toEqual({ tag: 'r13-b', parents: [{ ref: 'a', status: 'completed' }] });

    // Past the longest retention: every job, the edges and the flow go in one pass.
    await t.db.query(`UPDATE background_jobs SET finished_at = now() - interval '8 days' WHERE flow_id = $1`, [flow.id]);
    await t.db.query(`UPDATE background_flows SET finished_at = now() - interval '8 days' WHERE id = $1`, [flow.id]);
    await t.app.get(MaintenanceScheduler).pruner.runOnce();
    expect(await flowJobs(flow.id)).toEqual([]);
    expect(await flowRow(flow.id)).toBeUndefined();
  });

  it('a flow of completed jobs only is pruned at completedRetentionMs, all together', async () => {
    const flow = await queue().enqueueFlow({ jobs: [{ ref: 'a', queue: 'foa-step', payload: { tag: 'r13-ok-a' } }, { ref: 'b', queue: 'foa-step', payload: { tag: 'r13-ok-b' }, dependsOn: ['a'] }] });
    await flowReaches(flow.id, ['completed']);
    await t.db.query(`UPDATE background_jobs SET finished_at = now() - interval '2 days' WHERE flow_id = $1`, [flow.id]);
    await t.db.query(`UPDATE background_flows SET finished_at = now() - interval '2 days' WHERE id = $1`, [flow.id]);
    await t.app.get(MaintenanceScheduler).pruner.runOnce();
    expect(await flowJobs(flow.id)).toEqual([]);
    expect(await flowRow(flow.id)).toBeUndefined();
  });

  it('a job of an ended flow retried to run alone keeps the rest of its flow until it is final again; then they go together', async () => {
    // Found by the simulation (seed 1869304768): a compensated flow's failed step, retried after the end with another
    // step, was pruned while that other step still ran, so the flow lost a job it was judged by.
    const flow = await queue().enqueueFlow({
      jobs: [
        { ref: 'a', queue: 'foa-step', payload: { tag: 'r13l-a' }, compensate: { queue: 'foa-undo', payload: { tag: 'r13l-undo' } } },
        { ref: 'b', queue: 'foa-gate', payload: { tag: 'r13l-b1', fail: true }, dependsOn: ['a'] },
      ],
    });
    await t.db.query(`INSERT INTO gates (tag) VALUES ('r13l-b1')`);
    await flowReaches(flow.id, ['compensated']);
    await t.db.query(`UPDATE background_jobs SET payload = '{"tag":"r13l-b2"}' WHERE id = $1`, [flow.jobs.b]);
    expect(await queue().retry(flow.jobs.b)).toBe(true);
    await waitFor('the retried step to run', async () => (await runs('r13l-b2')) === 1);
    expect((await flowRow(flow.id)).status).toBe('compensated');
    const age = async () => {
      await t.db.query(`UPDATE background_jobs SET finished_at = now() - interval '8 days' WHERE flow_id = $1 AND finished_at IS NOT NULL`, [flow.id]);
      await t.db.query(`UPDATE background_flows SET finished_at = now() - interval '8 days' WHERE id = $1`, [flow.id]);
    };
    await age();
    await t.app.get(MaintenanceScheduler).pruner.runOnce();
    expect((await flowJobs(flow.id)).map((j) => [j.ref, j.status])).toEqual([
      ['a', 'completed'],
      ['b', 'processing'],
      ['compensate:a', 'completed'],
    ]);
    expect(await flowRow(flow.id)).toBeDefined();

    await t.db.query(`INSERT INTO gates (tag) VALUES ('r13l-b2')`);
    await waitFor('the retried step to complete', async () => (await jobRow(flow.jobs.b)).status === 'completed');
    await age();
    await t.app.get(MaintenanceScheduler).pruner.runOnce();
    expect(await flowJobs(flow.id)).toEqual([]);
    expect(await flowRow(flow.id)).toBeUndefined();
  });

  it('retry of a job whose parent is gone anyway (deleted, or pruned by an older version) is refused naming the parent', async () => {
    const flow = await queue().enqueueFlow({
      jobs: [
        { ref: 'a', queue: 'foa-step', payload: { tag: 'r13g-a' } },
        { ref: 'b', queue: 'foa-step', payload: { tag: 'r13g-b', fail: true }, dependsOn: ['a'] },
      ],
    });
    await flowReaches(flow.id, ['failed']);
    await t.db.query(`DELETE FROM background_jobs WHERE id = $1`, [flow.jobs.a]);
    await t.db.query(`UPDATE background_jobs SET payload = '{"tag":"r13g-b"}' WHERE id = $1`, [flow.jobs.b]);
    await expect(queue().retry(flow.jobs.b)).rejects.toThrow(`Cannot retry job ${flow.jobs.b}: its parent job ${flow.jobs.a} no longer exists (pruned past retention, or deleted)`);
    expect((await jobRow(flow.jobs.b)).status).toBe('failed');
    expect(await runs('r13g-b')).toBe(1);
  });
});

describe('item 14: a failed compensation retried to completion', () => {
  it('ends the flow compensated (compensating while it runs again)', async () => {
    const flow = await queue().enqueueFlow({
      jobs: [
        { ref: 'charge', queue: 'foa-step', payload: { tag: 'r14-charge' }, compensate: { queue: 'foa-undo', payload: { tag: 'r14-refund', fail: true } } },
        { ref: 'ship', queue: 'foa-step', payload: { tag: 'r14-ship', fail: true }, dependsOn: ['charge'] },
      ],
    });
    await flowReaches(flow.id, ['compensation_failed']);
    const [refund] = (await flowJobs(flow.id)).filter((j) => j.ref === 'compensate:charge');
    expect(refund.status).toBe('failed');
    await t.db.query(`UPDATE background_jobs SET payload = '{"tag":"r14-refund"}' WHERE id = $1`, [refund.id]);
    expect(await queue().retry(refund.id)).toBe(true);
    const ended = await flowReaches(flow.id, ['compensated']);
    expect(ended.finished_at).not.toBeNull();
    expect((await jobRow(refund.id)).status).toBe('completed');
    expect(await runs('r14-refund')).toBe(2);
    expect((await queue().getFlow(flow.id))?.status).toBe('compensated');
  });
});

describe('item 13 with partitioned history: the mover keeps a failed flow together', () => {
  let app: INestApplicationContext;
  let db: pg.Pool;
  const HOUR = 3_600_000;

  beforeAll(async () => {
    const url = await createTestDatabase('flowsops-history');
    db = sqlPool(url);
    app = await startApp(url, {
      providers: [Handlers],
      queue: { maintenance: { enabled: false, completedRetentionMs: HOUR, failedRetentionMs: 7 * DAY, history: { partitionWidth: 'hour', moveAfterMs: 0 } } },
    });
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it("a failed flow's completed jobs stay in background_jobs (the partition of completed jobs is dropped sooner) while its failed ones move; retry brings it back whole", async () => {
    const q = app.get(QueueService);
    const flow = await q.enqueueFlow({
      jobs: [
        { ref: 'a', queue: 'foa-step', payload: { tag: 'h13-a' } },
        { ref: 'b', queue: 'foa-step', payload: { tag: 'h13-b', fail: true }, dependsOn: ['a'] },
      ],
    });
    await waitFor('the flow to fail', async () => (await db.query(`SELECT status FROM background_flows WHERE id = $1`, [flow.id])).rows[0]?.status === 'failed');
    const mover = app.get(MaintenanceScheduler).historyMover!;
    await mover.runOnce();
    const where = async () =>
      (
        await db.query(
          `SELECT flow_ref AS ref, false AS moved FROM background_jobs WHERE flow_id = $1
           UNION ALL SELECT flow_ref, true FROM background_jobs_history WHERE flow_id = $1 ORDER BY 1`,
          [flow.id],
        )
      ).rows;
    expect(await where()).toEqual([
      { ref: 'a', moved: false },
      { ref: 'b', moved: true },
    ]);
    await db.query(`UPDATE background_jobs_history SET payload = '{"tag":"h13-b"}' WHERE id = $1`, [flow.jobs.b]);
    expect(await q.retry(flow.jobs.b)).toBe(true);
    expect((await q.waitForFlow(flow.id, { timeoutMs: 10_000 })).status).toBe('completed');
  });
});
