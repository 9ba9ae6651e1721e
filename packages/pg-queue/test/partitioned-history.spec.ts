import { Injectable, Logger, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { JobStore } from '../src/internal.js';
import { Pruner } from '../src/maintenance/pruner.js';
import { HistoryStore } from '../src/store/history.store.js';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';
import { TrafficProbe } from './support/traffic-probe.js';
import { buildCli, runCli } from './support/run-cli.js';

// Partitioned history (README: "Long retention: partitioned history"): finished jobs leave background_jobs for
// background_jobs_history, and retention drops whole partitions. Every assertion reads the tables.

const HOUR = 3_600_000;
let db: pg.Pool;

@Injectable()
class Handlers {
  @JobHandler('work', { concurrency: 8 })
  async work(job: Job<{ n: number }>) {
    // The ledger: one row per run, so a job run twice shows twice.
    await db.query(`INSERT INTO runs (job_id) VALUES ($1)`, [job.id]);
    return { n: job.payload.n };
  }

  @JobHandler('dead', { maxAttempts: 1 })
  async dead(job: Job<{ fail: boolean }>) {
    if (job.payload.fail) throw new Error('boom');
    return 'ok';
  }
}

const history = (options: object = {}) => ({
  completedRetentionMs: 2 * HOUR,
  failedRetentionMs: 2 * HOUR,
  history: { partitionWidth: 'hour' as const, moveIntervalMs: 20, ...options },
});

const where = async (ids: string[]) => {
  const { rows } = await db.query<{ hot: string[]; moved: string[] }>(
    `SELECT ARRAY(SELECT id::text FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id) AS hot,
            ARRAY(SELECT id::text FROM background_jobs_history WHERE id = ANY($1::int8[]) ORDER BY id) AS moved`,
    [ids],
  );
  return rows[0];
};
const partitions = async () =>
  (await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
     WHERE i.inhparent IN ('background_jobs_history_completed'::regclass, 'background_jobs_history_failed'::regclass) ORDER BY 1`,
  )).rows.map((r) => r.name);

describe('partitioned history', () => {
  let url: string;
  let app: INestApplicationContext;
  let queue: QueueService;

  beforeAll(async () => {
    url = await createTestDatabase('history');
    db = sqlPool(url);
    await db.query(`CREATE TABLE runs (job_id bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`);
    app = await startApp(url, { providers: [Handlers], queue: { maintenance: history(), leaseMs: 5_000 } });
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('moves completed, failed and cancelled jobs into their partitions; get, waitFor, stats and the lists read them there', async () => {
    const done = await queue.enqueue('dead', { fail: false });
    const failed = await queue.enqueue('dead', { fail: true });
    const cancelled = await queue.enqueue('idle', {}, { delayMs: 60_000 });
    await queue.cancel(cancelled);
    const waiting = await queue.enqueue('idle', {}, { delayMs: 60_000 });
    expect(await queue.waitFor(done, { timeoutMs: 10_000 })).toBe('ok');
    await waitFor('the three finished jobs moved', async () => (await where([done, failed, cancelled])).moved.length === 3);
    expect(await where([done, failed, cancelled, waiting])).toEqual({ hot: [waiting], moved: [done, failed, cancelled] });
    // Each kind in its own partition of the hour it finished in (by UTC).
    const { rows } = await db.query(`SELECT id::text, status, tableoid::regclass::text AS part FROM background_jobs_history WHERE id = ANY($1::int8[]) ORDER BY id`, [[done, failed, cancelled]]);
    expect(rows.map((r) => [r.status, r.part.replace(/_p\d{8}_\d{2}$/, '')])).toEqual([
      ['completed', 'background_jobs_history_completed'],
      ['failed', 'background_jobs_history_failed'],
      ['cancelled', 'background_jobs_history_failed'],
    ]);
    // Read as if nothing moved.
    expect(await queue.get(done)).toMatchObject({ id: done, status: 'completed', result: 'ok' });
    expect(await queue.get(failed)).toMatchObject({ status: 'failed', lastError: expect.stringContaining('boom') });
    expect((await queue.get(failed))!.history).toHaveLength(1);
    await expect(queue.waitFor(failed, { timeoutMs: 2_000 })).rejects.toThrow(/boom/);
    expect(await queue.cancel(done)).toBe('completed');
    const stats = await queue.stats();
    expect(stats.dead).toMatchObject({ completed: 1, failed: 1 });
    expect(stats.idle).toMatchObject({ queued: 1, cancelled: 1 });
  });

  it('retry() of a dead letter that history holds brings it back and runs it', async () => {
    const failed = await queue.enqueue('dead', { fail: true });
    await waitFor('the dead letter moved', async () => (await where([failed])).moved.length === 1);
    await db.query(`UPDATE background_jobs_history SET payload = '{"fail": false}' WHERE id = $1`, [failed]);
    expect(await queue.retry(failed)).toBe(true);
    expect(await queue.waitFor(failed, { timeoutMs: 10_000 })).toBe('ok');
    expect(await queue.get(failed)).toMatchObject({ status: 'completed', attempts: 1 });
    await waitFor('moved again', async () => (await where([failed])).moved.length === 1);
    expect(await where([failed])).toEqual({ hot: [], moved: [failed] });
    expect(await queue.retry('999999999')).toBe(false);
  });

  it('the jobs of an open flow stay in background_jobs until the flow finishes', async () => {
    const flow = await queue.enqueueFlow({
      jobs: [
        { ref: 'a', queue: 'dead', payload: { fail: false } },
        { ref: 'b', queue: 'idle', payload: {}, dependsOn: ['a'] },
      ],
    });
    const a = flow.jobs.a;
    await waitFor('a completed', async () => (await queue.get(a))?.status === 'completed');
    // A plain job that finished after a has moved: the mover's pass that took it read its candidates (oldest first)
    // with a already finished, and passed it over.
    const later = await queue.enqueue('dead', { fail: false });
    await queue.waitFor(later, { timeoutMs: 10_000 });
    await waitFor('the later job moved', async () => (await where([later])).moved.length === 1);
    expect(await where([a])).toEqual({ hot: [a], moved: [] });
    await queue.cancelFlow(flow.id);
    await waitFor('the finished flow moved', async () => (await where(Object.values(flow.jobs))).moved.length === 2);
    expect((await queue.getFlow(flow.id))!.jobs).toHaveLength(2);
  });

  it('the CLI lists, retries and deletes the jobs history holds', async () => {
    await buildCli();
    const failed = await queue.enqueue('dead', { fail: true });
    await waitFor('moved', async () => (await where([failed])).moved.length === 1);
    const cli = (...args: string[]) => runCli(args, { DATABASE_URL: url });
    const list = await cli('jobs', 'list', '--queue', 'dead', '--status', 'failed', '--json');
    expect(list.code).toBe(0);
    expect(list.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { id: string }).id)).toContain(failed);
    await db.query(`UPDATE background_jobs_history SET payload = '{"fail": false}' WHERE id = $1`, [failed]);
    expect((await cli('jobs', 'retry', failed, '--yes')).code).toBe(0);
    expect(await queue.waitFor(failed, { timeoutMs: 10_000 })).toBe('ok');
    await waitFor('moved again', async () => (await where([failed])).moved.length === 1);
    expect((await cli('jobs', 'delete', '--queue', 'dead', '--status', 'completed', '--yes')).code).toBe(0);
    expect(await where([failed])).toEqual({ hot: [], moved: [] });
  }, 60_000);
});

describe('partitioned history: partitions rotate while workers run', () => {
  let app: INestApplicationContext;
  let queue: QueueService;
  let pruner: Pruner;

  beforeAll(async () => {
    const url = await createTestDatabase('history_rotation');
    db = sqlPool(url);
    await db.query(`CREATE TABLE runs (job_id bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`);
    // moveAfterMs: the test ages half the finished jobs before the mover may take them. The app keeps jobs 5 h (so the
    // mover takes jobs aged 3.5 h); the test's own pruner drops what is past 2 h, so that partitions are dropped while
    // the mover fills the current one, and now and then one it is writing into.
    app = await startApp(url, {
      providers: [Handlers],
      queue: { maintenance: { ...history({ moveAfterMs: 500 }), completedRetentionMs: 5 * HOUR, failedRetentionMs: 5 * HOUR }, leaseMs: 5_000 },
    });
    queue = app.get(QueueService);
    const store = app.get(JobStore);
    pruner = new Pruner(store, { completedRetentionMs: 2 * HOUR, failedRetentionMs: 2 * HOUR, batchSize: 5_000, maxBatchesPerPass: 100 }, new Logger('test pruner'), store.history);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('jobs move and partitions are dropped while workers run: nothing lost, no job run twice, get(id) finds every job through the move', async () => {
    const ids: string[] = [];
    const misses: string[] = [];
    const odd: string[] = [];
    let stop = false;
    // Half the finished jobs are made 3.5 hours old before the mover takes them: their hourly partitions are past the
    // test pruner's 2 h retention, and it drops them while the rest keep moving.
    const ager = (async () => {
      while (!stop) {
        await db.query(`UPDATE background_jobs SET finished_at = finished_at - interval '3.5 hours'
                        WHERE queue_name = 'work' AND status = 'completed' AND id % 2 = 0 AND finished_at > now() - interval '1 hour'`);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const pruning = (async () => {
      while (!stop) {
        await pruner.runOnce();
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    // get(id) of odd (kept) jobs all along: never missing, whichever table holds it.
    const reader = (async () => {
      while (!stop) {
        const sample = ids.filter((id) => BigInt(id) % 2n === 1n).slice(-50);
        for (const id of sample) if ((await queue.get(id)) === null) misses.push(id);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    try {
    for (let round = 0; round < 20; round++) {
      ids.push(...(await queue.enqueueMany(Array.from({ length: 100 }, (_, n) => ({ queue: 'work', payload: { n } })))));
      await new Promise((r) => setTimeout(r, 50));
    }
    await waitFor('every job ran', async () => (await db.query(`SELECT count(DISTINCT job_id)::int AS n FROM runs`)).rows[0].n === ids.length, 60_000);
      odd.push(...ids.filter((id) => BigInt(id) % 2n === 1n));
    await waitFor('every kept job moved', async () => (await where(odd)).moved.length === odd.length, 30_000);
      const aged = ids.filter((id) => BigInt(id) % 2n === 0n);
      await waitFor('every aged job moved', async () => (await where(aged)).hot.length === 0, 30_000);
    } finally {
      stop = true;
      await Promise.all([ager, pruning, reader]);
    }
    await pruner.runOnce();

    expect(misses).toEqual([]);
    const { rows: [ledger] } = await db.query(`SELECT count(*)::int AS runs, count(DISTINCT job_id)::int AS jobs FROM runs`);
    expect(ledger).toEqual({ runs: ids.length, jobs: ids.length });
    // Kept jobs: each once, in history, completed with its result; none left behind or in both tables.
    const { rows: [kept] } = await db.query(
      `SELECT (SELECT count(*)::int FROM background_jobs_history WHERE id = ANY($1::int8[]) AND status = 'completed' AND result IS NOT NULL) AS moved,
              (SELECT count(*)::int FROM background_jobs WHERE id = ANY($1::int8[])) AS hot,
              (SELECT count(*)::int FROM background_jobs AS j JOIN background_jobs_history AS h ON h.id = j.id) AS twice`,
      [odd],
    );
    expect(kept).toEqual({ moved: odd.length, hot: 0, twice: 0 });
    // Aged jobs: gone with their dropped partitions, and no partition past retention is left.
    const even = ids.filter((id) => BigInt(id) % 2n === 0n);
    expect(await where(even)).toEqual({ hot: [], moved: [] });
    expect((await partitions()).filter((p) => p.includes('completed'))).toHaveLength(await db.query(
      `SELECT count(DISTINCT date_trunc('hour', finished_at, 'UTC'))::int AS n FROM background_jobs_history WHERE status = 'completed'`,
    ).then((r) => r.rows[0].n));
  }, 120_000);

});

describe('partitioned history: several movers at once', () => {
  it('three instances move the same backlog into partitions none of them has made yet: each job once, each partition once, no error', async () => {
    const url = await createTestDatabase('history_movers');
    db = sqlPool(url);
    // The schema only: no app runs a mover of its own here; the three movers below are three instances' HistoryStores,
    // each on its own pool with its own cache of the partitions it knows.
    const schema = await startApp(url, { queue: { workers: false } });
    await schema.close();
    // 6,000 finished jobs over the last 4 hours: 5 hourly partitions of each kind to make, none made yet.
    await db.query(`
      INSERT INTO background_jobs (queue_name, payload, status, attempts, finished_at, last_error)
      SELECT 'work', jsonb_build_object('n', g), s.status::background_job_status, 1,
             now() - interval '5 minutes' - (g % 240) * interval '1 minute', CASE WHEN s.status <> 'completed' THEN 'boom' END
      FROM generate_series(1, 6000) AS g
      CROSS JOIN LATERAL (SELECT (ARRAY['completed', 'completed', 'failed', 'cancelled'])[1 + g % 4] AS status) AS s`);
    const pools = [sqlPool(url), sqlPool(url), sqlPool(url)];
    const stores = pools.map((pool) => new HistoryStore(pool));
    const errors: string[] = [];
    let turnsRefused = 0;
    let moved = 0;
    const left = async () => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n;
    // Each mover stops at its first error (reported below, not retried until a timeout), and after a bounded number
    // of batches: 6,000 rows in batches of 500 are 12 batches that move; the rest find another mover's turn held.
    const MAX_BATCHES = 2_000;
    let batches = 0;
    try {
      await Promise.all(
        stores.map(async (store) => {
          while (errors.length === 0 && batches < MAX_BATCHES && (await left()) > 0) {
            batches += 1;
            try {
              const batch = await store.moveBatch('hour', 0, 500, { completedMs: 5 * HOUR, failedMs: 5 * HOUR });
              if (!batch.held) turnsRefused += 1;
              moved += batch.moved;
            } catch (error) {
              errors.push((error as Error).message);
            }
          }
        }),
      );
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
    expect(errors).toEqual([]);
    expect(batches).toBeLessThan(MAX_BATCHES);
    expect(moved).toBe(6_000);
    console.log(`three movers: 6000 jobs moved, ${turnsRefused} batch(es) found another mover's turn held`);
    const { rows: [counts] } = await db.query(
      `SELECT (SELECT count(*)::int FROM background_jobs_history) AS rows, (SELECT count(DISTINCT id)::int FROM background_jobs_history) AS jobs,
              (SELECT count(*)::int FROM background_jobs_history_completed) AS completed, (SELECT count(*)::int FROM background_jobs_history_failed) AS failed`,
    );
    expect(counts).toEqual({ rows: 6_000, jobs: 6_000, completed: 3_000, failed: 3_000 });
    // One partition per kind and UTC hour that holds jobs, no more (a lost race left no empty or duplicate partition).
    const { rows: [hours] } = await db.query<{ completed: number; failed: number }>(
      `SELECT count(DISTINCT date_trunc('hour', finished_at, 'UTC')) FILTER (WHERE status = 'completed')::int AS completed,
              count(DISTINCT date_trunc('hour', finished_at, 'UTC')) FILTER (WHERE status <> 'completed')::int AS failed
       FROM background_jobs_history`,
    );
    const names = await partitions();
    expect(names.filter((n) => n.includes('_completed_'))).toHaveLength(hours.completed);
    expect(names.filter((n) => n.includes('_failed_'))).toHaveLength(hours.failed);
    await db.end();
  }, 60_000);
});

describe('partitioned history: a drop interrupted in DETACH ... CONCURRENTLY', () => {
  it('a pruner that dies while its detach waits leaves the partition pending; moves and reads go on, and the next pass finishes the detach (and drops it when past retention)', async () => {
    const url = await createTestDatabase('history_detach_pending');
    db = sqlPool(url);
    // The app moves jobs (history on, retention 5 h, so its own pruner drops none of the partitions below); the test's
    // pruners, with 2 h, drop the old ones.
    const app = await startApp(url, { queue: { workers: false, maintenance: { ...history(), completedRetentionMs: 5 * HOUR, failedRetentionMs: 5 * HOUR } } });
    const queue = app.get(QueueService);
    const store = app.get(JobStore);
    const pruner = (retentionMs: number, name: string, history: HistoryStore) =>
      new Pruner(store, { completedRetentionMs: retentionMs, failedRetentionMs: retentionMs, batchSize: 1_000, maxBatchesPerPass: 10 }, new Logger(name), history);
    const finished = async (n: number, ago: string) =>
      (await db.query<{ id: string }>(
        `INSERT INTO background_jobs (queue_name, payload, status, attempts, finished_at, result)
         SELECT 'work', jsonb_build_object('n', g), 'completed', 1, now() - $2::interval, '{"ok": true}'
         FROM generate_series(1, $1::int) AS g RETURNING id::text`,
        [n, ago],
      )).rows.map((r) => r.id);
    const partitionOf = async (id: string) =>
      (await db.query<{ name: string }>(`SELECT tableoid::regclass::text AS name FROM background_jobs_history WHERE id = $1::int8`, [id])).rows[0].name;
    const pendingDetaches = async () =>
      (await db.query<{ name: string }>(`SELECT inhrelid::regclass::text AS name FROM pg_inherits WHERE inhdetachpending`)).rows.map((r) => r.name);
    const rowsOf = async (table: string) => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n;

    // A long read of history holds a snapshot that can see the oldest partition, so a pruner's DETACH ... CONCURRENTLY
    // waits in its second step; the pruner's process dies there: its backend is ended, as a kill or a lost connection
    // ends it.
    const interruptedDrop = async () => {
      const reader = await db.connect();
      const pool = sqlPool(url);
      // The ended backend's client reports its end on the pool: the dying process would not be there to hear it.
      pool.on('error', () => undefined);
      try {
        await reader.query(`BEGIN ISOLATION LEVEL REPEATABLE READ`);
        await reader.query(`SELECT count(*) FROM background_jobs_history`);
        const pass = pruner(2 * HOUR, 'dying pruner', new HistoryStore(pool)).dropExpiredPartitions().then(
          () => 'finished',
          (error: Error) => error.message,
        );
        const detach = await waitFor('a DETACH waiting for the reader', async () => {
          const { rows } = await db.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE query LIKE '%DETACH PARTITION%CONCURRENTLY%' AND state = 'active' AND wait_event_type = 'Lock'`,
          );
          return rows[0]?.pid;
        });
        await db.query(`SELECT pg_terminate_backend($1)`, [detach]);
        expect(await pass).toMatch(/terminat/i);
      } finally {
        await reader.query(`COMMIT`).catch(() => undefined);
        reader.release();
        await pool.end();
      }
    };

    const older = await finished(300, '4 hours 30 minutes');
    const old = await finished(300, '3 hours 30 minutes');
    const recent = await finished(300, '10 minutes');
    await waitFor('the jobs moved', async () => (await where([...older, ...old, ...recent])).moved.length === 900, 30_000);
    const olderPartition = await partitionOf(older[0]);
    const oldPartition = await partitionOf(old[0]);
    expect(olderPartition).not.toBe(oldPartition);

    // 1. The oldest partition's detach is interrupted. While it is pending its jobs are out of every new read of history;
    // the other partitions read and take moves as before, and a new partition is made and filled.
    await interruptedDrop();
    expect(await pendingDetaches()).toEqual([olderPartition]);
    expect((await where(older)).moved).toEqual([]);
    expect((await queue.get(recent[0]))?.status).toBe('completed');
    const later = await finished(100, '70 minutes');
    const current = await finished(100, '1 minute');
    await waitFor('jobs moved while the detach is pending', async () => (await where([...later, ...current])).moved.length === 200, 30_000);

    // A pruner whose retention (5 h) does not reach the partition finishes the detach and keeps the table, whole.
    expect(await pruner(5 * HOUR, 'keeping pruner', store.history).dropExpiredPartitions()).toBe(0);
    expect(await pendingDetaches()).toEqual([]);
    expect(await partitions()).not.toContain(olderPartition);
    expect(await rowsOf(olderPartition)).toBe(300);

    // 2. The next oldest's detach is interrupted too: it could not have begun while the first was pending.
    await interruptedDrop();
    expect(await pendingDetaches()).toEqual([oldPartition]);
    // A pruner whose retention reaches it finishes the detach and drops the table.
    expect(await pruner(2 * HOUR, 'next pruner', store.history).dropExpiredPartitions()).toBe(1);
    expect((await db.query(`SELECT to_regclass($1) AS t`, [oldPartition])).rows[0].t).toBeNull();
    expect(await partitions()).not.toContain(oldPartition);
    const { rows: [left] } = await db.query(
      `SELECT (SELECT count(*)::int FROM background_jobs_history WHERE id = ANY($1::int8[])) AS kept,
              (SELECT count(*)::int FROM background_jobs_history WHERE id = ANY($2::int8[])) AS gone,
              (SELECT count(*)::int FROM background_jobs WHERE queue_name = 'work') AS hot`,
      [[...recent, ...later, ...current], [...old, ...older]],
    );
    expect(left).toEqual({ kept: 500, gone: 0, hot: 0 });
    // A further pass has nothing left to do, and no error.
    expect(await pruner(2 * HOUR, 'last pruner', store.history).dropExpiredPartitions()).toBe(0);
    await app.close();
    await db.end();
  }, 90_000);
});

describe('partitioned history: the online migration of an existing table', () => {
  it('moves 200k finished rows in batches while enqueues and claims go on, none of them waiting on a lock', async () => {
    const url = await createTestDatabase('history_migration');
    const pool = sqlPool(url);
    // The schema, then a table that has been running without history: 200k finished jobs over the last 30 hours.
    let app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    await app.close();
    await pool.query(`
      INSERT INTO background_jobs (queue_name, payload, status, finished_at, created_at, updated_at, result)
      SELECT 'old', jsonb_build_object('n', g), CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'completed' END::background_job_status,
             now() - (g % 108000) * interval '1 second', now() - interval '31 hours', now(), '{"ok": true}'
      FROM generate_series(1, 200000) AS g`);
    await pool.query(`ANALYZE background_jobs`);
    const probe = await TrafficProbe.start(url, [
      `INSERT INTO background_jobs (queue_name, payload) VALUES ('probe', '{}')`,
      `UPDATE background_jobs SET status = 'processing', locked_by = 'probe', locked_at = now(), lease_expires_at = now() + interval '30 seconds'
       WHERE id = (SELECT id FROM background_jobs WHERE queue_name = 'probe' AND status = 'queued' ORDER BY priority DESC, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)`,
      `SELECT * FROM background_jobs_all WHERE id = 1`,
    ]);
    app = await startApp(url, { queue: { workers: false, maintenance: { ...history({ moveBatchSize: 5_000 }), completedRetentionMs: 48 * HOUR, failedRetentionMs: 48 * HOUR } } });
    try {
      await waitFor('every old row moved', async () => (await pool.query(`SELECT count(*)::int AS n FROM background_jobs_history`)).rows[0].n === 200_000, 120_000, 200);
    } finally {
      await app.close();
    }
    const report = await probe.stop();
    const { rows: [after] } = await pool.query(`
      SELECT (SELECT count(*)::int FROM background_jobs WHERE queue_name = 'old') AS hot,
             (SELECT count(*)::int FROM background_jobs_history WHERE queue_name = 'old' AND result IS NOT NULL) AS moved,
             (SELECT count(*)::int FROM background_jobs_history WHERE status = 'failed') AS failed`);
    expect(after).toEqual({ hot: 0, moved: 200_000, failed: 20_000 });
    // The probe ran throughout; no statement of it waited behind the move (a lock on the table would show as seconds).
    expect(report.statements).toBeGreaterThan(100);
    expect(report.maxMs).toBeLessThan(1_000);
    await pool.end();
  }, 180_000);
});

describe('partitioned history: options', () => {
  it('refuses a partition width longer than a retention, and an unknown width, at boot', async () => {
    const url = await createTestDatabase('history_options');
    await expect(startApp(url, { queue: { workers: false, maintenance: { completedRetentionMs: HOUR, history: true } } })).rejects.toThrow(
      /partitionWidth="day": expected at most completedRetentionMs \(3600000 ms\)/,
    );
    await expect(startApp(url, { queue: { workers: false, maintenance: { history: { partitionWidth: 'year' as 'day' } } } })).rejects.toThrow(
      /partitionWidth="year": expected one of 'hour', 'day', 'week', 'month'/,
    );
  });
});
