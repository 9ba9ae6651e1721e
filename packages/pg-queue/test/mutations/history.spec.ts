import { Injectable, Logger, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { JobStore } from '../../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { Pruner } from '../../src/maintenance/pruner.js';
import { HistoryStore } from '../../src/store/history.store.js';
import { sqlPool, startApp, waitFor } from '../support/test-app.js';

// Partitioned history where the other specs do not look (issue 40, "The tests that are missing today"): each
// retention drops its own kind's partitions, a dropped partition takes its jobs' attempt history with it, the
// mover re-checks a row between reading it and moving it, and retry() of a job that history holds brings its flow
// back with it. Movers and pruners are called directly, one pass at a time; every assertion reads the tables.

const HOUR = 3_600_000;
let db: pg.Pool;

describe('partitioned history: retentions, attempt history and the mover’s re-check', () => {
  let url: string;
  let app: INestApplicationContext;
  let store: JobStore;

  beforeAll(async () => {
    url = await createTestDatabase('mutations_history');
    db = sqlPool(url);
    // The schema only: the movers and pruners below are called by the tests.
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    store = app.get(JobStore);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  /** `n` jobs of `status` that finished `ago`, each with one row of attempt history. */
  const finished = async (n: number, status: 'completed' | 'failed', ago: string, queue: string) => {
    const ids = (await db.query<{ id: string }>(
      `INSERT INTO background_jobs (queue_name, payload, status, attempts, finished_at, last_error)
       SELECT $4, '{}', $2::background_job_status, 1, now() - $3::interval, CASE WHEN $2 = 'failed' THEN 'boom' END
       FROM generate_series(1, $1::int) RETURNING id::text`,
      [n, status, ago, queue],
    )).rows.map((r) => r.id);
    await db.query(
      `INSERT INTO background_job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error)
       SELECT id, 1, 'w', finished_at - interval '1 second', finished_at, 'failed', 'boom' FROM background_jobs WHERE id = ANY($1::int8[])`,
      [ids],
    );
    return ids;
  };
  const moveAll = async (history: HistoryStore, afterMs = 0) => {
    let moved = 0;
    for (let i = 0; i < 20; i++) {
      const batch = await history.moveBatch('hour', afterMs, 1_000, { completedMs: 10 * HOUR, failedMs: 10 * HOUR });
      moved += batch.moved;
      if (batch.read === 0) return moved;
    }
    throw new Error('the mover did not finish in 20 batches');
  };
  const count = async (sql: string, values: unknown[]) => (await db.query<{ n: number }>(sql, values)).rows[0].n;
  const inHistory = (ids: string[]) => count(`SELECT count(*)::int AS n FROM background_jobs_history WHERE id = ANY($1::int8[])`, [ids]);
  const attemptsOf = (ids: string[]) => count(`SELECT count(*)::int AS n FROM background_job_attempts WHERE job_id = ANY($1::int8[])`, [ids]);
  const pruner = (completedRetentionMs: number, failedRetentionMs: number | null) =>
    new Pruner(store, { completedRetentionMs, failedRetentionMs, batchSize: 1_000, maxBatchesPerPass: 10 }, new Logger('test pruner'), store.history);

  it('each kind’s partitions go by its own retention', async () => {
    const completed = await finished(20, 'completed', '3 hours 30 minutes', 'm-retention');
    const failed = await finished(20, 'failed', '3 hours 30 minutes', 'm-retention');
    expect(await moveAll(store.history)).toBe(40);
    expect(await inHistory([...completed, ...failed])).toBe(40);
    // Completed jobs kept 2 h, failed ones 10 h: only the completed partition is past its retention.
    expect(await pruner(2 * HOUR, 10 * HOUR).dropExpiredPartitions()).toBe(1);
    expect(await inHistory(completed)).toBe(0);
    expect(await inHistory(failed)).toBe(20);
    // Failed jobs kept 2 h, completed ones 10 h: now the failed partition goes.
    expect(await pruner(10 * HOUR, 2 * HOUR).dropExpiredPartitions()).toBe(1);
    expect(await inHistory(failed)).toBe(0);
  });

  it('a dropped partition takes its jobs’ attempt history with it, and only theirs', async () => {
    const old = await finished(20, 'failed', '4 hours 30 minutes', 'm-attempts');
    const recent = await finished(20, 'failed', '10 minutes', 'm-attempts');
    expect(await moveAll(store.history)).toBe(40);
    expect(await attemptsOf([...old, ...recent])).toBe(40);
    expect(await pruner(10 * HOUR, 2 * HOUR).dropExpiredPartitions()).toBe(1);
    expect(await inHistory(old)).toBe(0);
    expect(await attemptsOf(old)).toBe(0);
    expect(await inHistory(recent)).toBe(20);
    expect(await attemptsOf(recent)).toBe(20);
  });

  it('a job retried and finished again between the mover’s read and its move stays in background_jobs', async () => {
    // The current hour's partition of completed jobs exists (a job that finished just now, moved), so that a row moved
    // with its new finish time would land there rather than fail the statement.
    await finished(1, 'completed', '0 seconds', 'm-recheck');
    expect(await moveAll(store.history)).toBe(1);
    const [retried, untouched] = await finished(2, 'failed', '50 minutes', 'm-recheck');
    // The mover's statements on a pool that lets the test act between them: after the candidates are read and before
    // they are moved, `retried` is retried and finishes again (a new finish time, younger than moveAfterMs).
    const pool = sqlPool(url);
    let acted = false;
    const hooked = new Proxy(pool, {
      get(target, prop, receiver) {
        if (prop === 'query') {
          return async (query: string | pg.QueryConfig, values?: unknown[]) => {
            const text = typeof query === 'string' ? query : query.text;
            if (!acted && text.includes('INSERT INTO background_jobs_history SELECT * FROM moved')) {
              acted = true;
              await db.query(`UPDATE background_jobs SET status = 'completed', finished_at = now(), last_error = NULL WHERE id = $1`, [retried]);
            }
            return target.query(query as string, values);
          };
        }
        const value: unknown = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    try {
      const batch = await new HistoryStore(hooked).moveBatch('hour', 30 * 60_000, 1_000, { completedMs: 10 * HOUR, failedMs: 10 * HOUR });
      expect(acted).toBe(true);
      expect(batch).toEqual({ held: true, moved: 1, read: 2 });
    } finally {
      await pool.end();
    }
    expect(await inHistory([untouched])).toBe(1);
    expect(await inHistory([retried])).toBe(0);
    expect((await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [retried])).rows).toEqual([{ status: 'completed' }]);
  });
});

@Injectable()
class FlowHandlers {
  @JobHandler('m-h-first', { maxAttempts: 1 })
  async first(job: Job<{ fail: boolean }>) {
    await db.query(`INSERT INTO runs (job_id) VALUES ($1)`, [job.id]);
    if (job.payload.fail) throw new Error('first failed');
  }

  @JobHandler('m-h-then')
  async second(job: Job) {
    await db.query(`INSERT INTO runs (job_id) VALUES ($1)`, [job.id]);
  }
}

describe('partitioned history: retry() of a failed flow job that history holds', () => {
  let app: INestApplicationContext;
  let queue: QueueService;

  beforeAll(async () => {
    const url = await createTestDatabase('mutations_history_flow');
    db = sqlPool(url);
    await db.query(`CREATE TABLE runs (job_id int8)`);
    app = await startApp(url, {
      providers: [FlowHandlers],
      queue: { maintenance: { completedRetentionMs: 2 * HOUR, failedRetentionMs: 2 * HOUR, history: { partitionWidth: 'hour', moveIntervalMs: 20 } } },
    });
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('brings the rest of its flow back: the dependent that failed with it runs, and the flow completes', async () => {
    const flow = await queue.enqueueFlow({
      jobs: [
        { ref: 'first', queue: 'm-h-first', payload: { fail: true } },
        { ref: 'then', queue: 'm-h-then', payload: {}, dependsOn: ['first'] },
      ],
    });
    const { first, then } = flow.jobs;
    expect((await queue.waitForFlow(flow.id, { timeoutMs: 10_000 })).status).toBe('failed');
    await waitFor('both jobs moved to history', async () =>
      (await db.query(`SELECT count(*)::int AS n FROM background_jobs_history WHERE flow_id = $1`, [flow.id])).rows[0].n === 2, 10_000);
    await db.query(`UPDATE background_jobs_history SET payload = '{"fail": false}' WHERE id = $1`, [first]);

    expect(await queue.retry(first)).toBe(true);
    expect((await queue.waitForFlow(flow.id, { timeoutMs: 10_000 })).status).toBe('completed');
    const { rows } = await db.query(`SELECT id::text, status FROM background_jobs_all WHERE flow_id = $1 ORDER BY id`, [flow.id]);
    expect(rows).toEqual([{ id: first, status: 'completed' }, { id: then, status: 'completed' }]);
    expect((await db.query(`SELECT job_id::text AS id FROM runs ORDER BY job_id, ctid`)).rows).toEqual([{ id: first }, { id: first }, { id: then }]);
  });
});
