import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { JobStore } from '../../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { planFlow } from '../../src/flows/plan-flow.js';
import { FLOW_SQL } from '../../src/store/flow.sql.js';
import { sqlPool, startApp, waitFor } from '../support/test-app.js';

// Flow statements at the moments where two transactions meet (issue 40, "The tests that are missing today"). No
// worker runs: each test puts the rows where a race leaves them, then runs the two sides on two connections of its
// own, the second started only once the first holds its locks, and waits (bounded) for the second to block on the
// first (pg_stat_activity) before the first commits. So each interleaving is the same on every run, and every
// assertion reads the tables.

describe('flow statements where two transactions meet', () => {
  let url: string;
  let db: pg.Pool;
  let app: INestApplicationContext;
  let queue: QueueService;

  beforeAll(async () => {
    url = await createTestDatabase('mutations_flows');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  /** Runs `sql` on a connection of its own; `pid` is known before the statement is sent, `done` settles with it. */
  async function onItsOwn(sql: string, values: unknown[]): Promise<{ pid: number; done: Promise<pg.QueryResult>; client: pg.PoolClient }> {
    const client = await db.connect();
    const pid = (await client.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`)).rows[0].pid;
    const done = client.query(sql, values);
    done.catch(() => undefined);
    return { pid, done, client };
  }
  const waitingOnLock = (pid: number) =>
    waitFor(`backend ${pid} waiting on a lock`, async () =>
      (await db.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, [pid])).rowCount === 1,
    10_000, 10);

  it('two settles of a failing flow at once start each compensation once: the second waits for the first on the flow row', async () => {
    const flow = await queue.enqueueFlow({
      jobs: [
        { ref: 'a', queue: 'm-step', payload: {}, compensate: { queue: 'm-undo', payload: { undo: 'a' } } },
        { ref: 'b', queue: 'm-step', payload: {}, dependsOn: ['a'] },
      ],
    });
    // Where the last job of a failing flow leaves it: a completed (with a compensation), b failed, no job live.
    await db.query(`UPDATE background_jobs SET status = 'completed', attempts = 1, finished_at = now() WHERE id = $1`, [flow.jobs.a]);
    await db.query(`UPDATE background_job_deps SET done = true WHERE parent_id = $1`, [flow.jobs.a]);
    await db.query(`UPDATE background_jobs SET status = 'failed', attempts = 1, finished_at = now(), last_error = 'boom' WHERE id = $1`, [flow.jobs.b]);
    await db.query(`UPDATE background_flows SET status = 'failing', failed_job_id = $2, reason = 'job b failed' WHERE id = $1`, [flow.id, flow.jobs.b]);

    const first = await db.connect();
    let second: Awaited<ReturnType<typeof onItsOwn>> | undefined;
    try {
      await first.query('BEGIN');
      expect((await first.query(`SELECT pg_queue_flow_settle($1) AS st`, [flow.id])).rows[0].st).toBe('compensating');
      // The second settle runs while the first has not committed: it must wait for it on the flow row.
      second = await onItsOwn(`SELECT pg_queue_flow_settle($1) AS st`, [flow.id]);
      await waitingOnLock(second.pid);
      await first.query('COMMIT');
      expect((await second.done).rows[0].st).toBe('compensating');
    } finally {
      await first.query('ROLLBACK').catch(() => undefined);
      first.release();
      second?.client.release();
    }
    const { rows } = await db.query(`SELECT compensates::text AS compensates, status FROM background_jobs WHERE flow_id = $1 AND compensates IS NOT NULL`, [flow.id]);
    expect(rows).toEqual([{ compensates: flow.jobs.a, status: 'queued' }]);
    expect((await db.query(`SELECT status FROM background_flows WHERE id = $1`, [flow.id])).rows[0].status).toBe('compensating');
  });

  it('a second look that meets a claim of the child it would unblock leaves the claimed child alone', async () => {
    const flow = await queue.enqueueFlow({
      jobs: [
        { ref: 'p', queue: 'm-step', payload: {} },
        { ref: 'c', queue: 'm-step', payload: {}, dependsOn: ['p'] },
      ],
    });
    const { p, c } = flow.jobs;
    // The stranded state a second look is for: p completed, its edge resolved, c still blocked.
    await db.query(`UPDATE background_jobs SET status = 'completed', attempts = 1, finished_at = now() WHERE id = $1`, [p]);
    await db.query(`UPDATE background_job_deps SET done = true WHERE parent_id = $1`, [p]);

    // One second look (the sweeper's) unblocks c and a worker claims it, in one transaction not yet committed; the
    // other second look (the worker's, after its settle) saw c blocked and waits on its row.
    const first = await db.connect();
    let second: Awaited<ReturnType<typeof onItsOwn>> | undefined;
    try {
      await first.query('BEGIN');
      expect((await first.query(`SELECT pg_queue_flow_unblock($1) AS ok`, [c])).rows[0].ok).toBe(true);
      await first.query(
        `UPDATE background_jobs SET status = 'processing', locked_by = 'claimer', locked_at = now(), lease_expires_at = now() + interval '1 minute',
           attempts = attempts + 1, fence_token = fence_token + 1 WHERE id = $1`,
        [c],
      );
      second = await onItsOwn(FLOW_SQL.recheckFlowJobs, [[p]]);
      await waitingOnLock(second.pid);
      await first.query('COMMIT');
      expect((await second.done).rows[0]).toMatchObject({ unblocked: 0 });
    } finally {
      await first.query('ROLLBACK').catch(() => undefined);
      first.release();
      second?.client.release();
    }
    expect((await db.query(`SELECT status, locked_by, attempts FROM background_jobs WHERE id = $1`, [c])).rows[0]).toEqual({
      status: 'processing',
      locked_by: 'claimer',
      attempts: 1,
    });
  });

  it('a completion that spawns children is fenced by the claim’s token: a stale claim of the same worker spawns nothing', async () => {
    const store = app.get(JobStore);
    const flow = await queue.enqueueFlow({ jobs: [{ ref: 'parent', queue: 'm-spawn', payload: {} }] });
    const id = flow.jobs.parent;
    // The same worker claimed the job twice (its first claim was given back, or swept, meanwhile).
    const [stale] = (await store.claimJobs('m-spawn', 1, 'w', 60_000)).jobs;
    expect(await store.releaseJobs('w', [stale])).toBe(1);
    const [current] = (await store.claimJobs('m-spawn', 1, 'w', 60_000)).jobs;
    expect(current.id).toBe(id);
    expect(current.token).not.toBe(stale.token);
    const plan = await planFlow('spawn', [{ ref: 'child', queue: 'm-step', payload: {} }], 1_048_576, { maxAttempts: () => 3, fairnessKey: () => undefined });

    expect(await store.flows.completeSpawning('w', { id, token: stale.token, resultJson: '"stale"' }, plan)).toMatchObject({ completed: false, spawned: 0 });
    expect((await db.query(`SELECT status, result FROM background_jobs WHERE id = $1`, [id])).rows[0]).toEqual({ status: 'processing', result: null });
    expect((await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE flow_id = $1`, [flow.id])).rows[0].n).toBe(1);

    expect(await store.flows.completeSpawning('w', { id, token: current.token, resultJson: '"current"' }, plan)).toMatchObject({ completed: true, spawned: 1 });
    const { rows } = await db.query(`SELECT flow_ref, status, result FROM background_jobs WHERE flow_id = $1 ORDER BY id`, [flow.id]);
    expect(rows).toEqual([
      { flow_ref: 'parent', status: 'completed', result: 'current' },
      { flow_ref: 'parent/child', status: 'queued', result: null },
    ]);
  });
});
