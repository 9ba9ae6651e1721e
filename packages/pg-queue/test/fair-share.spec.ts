import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { LimitsFleet, maxOverlap } from './limits/limits-fleet.js';
import { LIMITS_MAINTENANCE, setUpLimits, tearDownLimits, useLimitsWorkerBuild } from './limits/limits-setup.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// Fair share across keys (the `fairness` option, README "Fair share across keys"), read back from the tables: what
// the handlers of real OS processes recorded (limit_runs: each run's key and its start by the database clock), or
// the jobs' own rows (locked_at: the claim that started them).

const workerScript = useLimitsWorkerBuild();

const doneCount = (db: pg.Pool, queue: string, key?: string) => async () => {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = $1 AND status = 'completed' AND ($2::text IS NULL OR concurrency_key = $2)`,
    [queue, key ?? null],
  );
  return rows[0].n;
};

/** Runs per key that started before the first of `keys` ran out of queued work (its last start): while both had work. */
async function startsWhileBothHadWork(db: pg.Pool, keys: [string, string]): Promise<Record<string, number>> {
  const { rows } = await db.query<{ k: string; n: number }>(
    `WITH last AS (SELECT min(m) AS t FROM (SELECT max(started_at) AS m FROM limit_runs WHERE queue = 'fair' AND concurrency_key = ANY($1) GROUP BY concurrency_key) AS x)
     SELECT concurrency_key AS k, count(*)::int AS n FROM limit_runs, last WHERE queue = 'fair' AND started_at < last.t GROUP BY concurrency_key`,
    [keys],
  );
  return Object.fromEntries(rows.map((r) => [r.k, r.n]));
}

describe('fair share across keys, over OS processes', () => {
  it('weights 3:1 give 3:1 of the starts while both keys have work (three processes)', async () => {
    const s = await setUpLimits('fairweights');
    const fleet = new LimitsFleet(workerScript(), s.url, {
      maintenance: LIMITS_MAINTENANCE,
      queues: { fair: { concurrency: 4, fairness: { weights: { heavy: 3 } } } },
    });
    try {
      // The light key's jobs first: without fairness they would all run before any of the heavy key's.
      await s.queue.enqueueMany(Array.from({ length: 300 }, () => ({ queue: 'fair', payload: { ms: 25 }, concurrencyKey: 'light' })));
      await s.queue.enqueueMany(Array.from({ length: 1_500 }, () => ({ queue: 'fair', payload: { ms: 25 }, concurrencyKey: 'heavy' })));
      await fleet.start(3);
      await waitFor('every job done', async () => (await doneCount(s.db, 'fair')()) === 1_800, 120_000, 100);
      const starts = await startsWhileBothHadWork(s.db, ['heavy', 'light']);
      const ratio = starts.heavy / starts.light;
      console.log(`fair share 3:1 over three processes: ${starts.heavy} heavy and ${starts.light} light starts while both had work (${ratio.toFixed(2)}:1)`);
      expect(starts.light).toBeGreaterThan(50);
      expect(ratio).toBeGreaterThanOrEqual(2.7);
      expect(ratio).toBeLessThanOrEqual(3.3);
    } finally {
      await tearDownLimits(s, fleet);
    }
  });

  it("a key with 3,000 jobs queued first does not hold back 40 small keys; the per-key cap holds beside it", async () => {
    const s = await setUpLimits('fairtenants');
    const fleet = new LimitsFleet(workerScript(), s.url, {
      maintenance: LIMITS_MAINTENANCE,
      queues: { fair: { concurrency: 4, fairness: true, concurrencyPerKey: 3 } },
    });
    try {
      await s.queue.enqueueMany(Array.from({ length: 3_000 }, () => ({ queue: 'fair', payload: { ms: 5 }, concurrencyKey: 'big' })));
      await s.queue.enqueueMany(
        Array.from({ length: 40 * 10 }, (_, i) => ({ queue: 'fair', payload: { ms: 5 }, concurrencyKey: `small-${String(i % 40).padStart(2, '0')}` })),
      );
      await fleet.start(3);
      await waitFor('every small key done', async () => (await doneCount(s.db, 'fair')()) - (await doneCount(s.db, 'fair', 'big')()) === 400, 120_000, 50);
      // In run_at order the 3,000 would all run first. Fairly shared, the big key gets about 1 slot in 41 meanwhile
      // (its cap is 3 of the 12 slots).
      const big = await doneCount(s.db, 'fair', 'big')();
      console.log(`fair share, one big key and 40 small ones: ${big} of the big key's 3,000 jobs done when the last small key finished`);
      expect(big).toBeLessThan(600);
      // Then the big key alone, 12 slots free and its cap 3: 150 more of its runs, not all 3,000. A capped key drains
      // at its cap per claim round trip (each end frees one of its 3 places, and a claim must come for it): tens of
      // seconds for the rest on a loaded machine, past the test's own minute (round 14i, PostgreSQL 15), and nothing
      // more to learn from them.
      await waitFor('150 more runs of the big key alone', async () => (await doneCount(s.db, 'fair', 'big')()) >= big + 150, 120_000, 50);
      // concurrencyPerKey counts every process's runs of a key (those still running too).
      const overlap = await maxOverlap(s.db, 'fair', true);
      expect(Math.max(...overlap.values())).toBeLessThanOrEqual(3);
      expect(overlap.get('big')).toBe(3);
    } finally {
      await tearDownLimits(s, fleet);
    }
  });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Runs of fair-one in the handler at once (a table's `processing` rows also count runs whose completion is not written yet). */
const running = { now: 0, most: 0 };

@Injectable()
class FairHandlers {
  @JobHandler('fair-one', { concurrency: 6, fairness: true })
  async one(job: Job<{ ms: number }>) {
    running.now++;
    running.most = Math.max(running.most, running.now);
    try {
      await sleep(job.payload.ms);
    } finally {
      running.now--;
    }
  }

  @JobHandler('fair-live', { concurrency: 4, fairness: { weights: { a: 3 } } })
  async live(job: Job<{ ms: number }>) {
    await sleep(job.payload.ms);
  }

  @JobHandler('fair-keyed-by-payload', { fairness: { key: (p: { tenant: string }) => `tenant-${p.tenant}` } })
  keyedByPayload() {}
}

describe('fair share in one process', () => {
  let url: string;
  let app: INestApplicationContext;
  let db: pg.Pool;
  let queue: QueueService;
  beforeAll(async () => {
    url = await createTestDatabase('fairone');
    db = sqlPool(url);
    app = await startApp(url, { providers: [FairHandlers] });
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('a key alone with work gets every slot (work-conserving)', async () => {
    await queue.enqueueMany(Array.from({ length: 60 }, () => ({ queue: 'fair-one', payload: { ms: 150 }, concurrencyKey: 'only' })));
    await waitFor('all done', async () => (await doneCount(db, 'fair-one')()) === 60, 30_000);
    expect(running.most).toBe(6);
  });

  it('jobs without a key are one more key: not starved by a keyed backlog', async () => {
    await queue.enqueueMany(Array.from({ length: 300 }, () => ({ queue: 'fair-one', payload: { ms: 20 }, concurrencyKey: 'backlog' })));
    await queue.enqueueMany(Array.from({ length: 12 }, () => ({ queue: 'fair-one', payload: { ms: 20 } })));
    await waitFor('the keyless jobs done', async () => {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'fair-one' AND concurrency_key IS NULL AND status = 'completed'`);
      return rows[0].n === 12;
    }, 30_000);
    expect(await doneCount(db, 'fair-one', 'backlog')()).toBeLessThan(150);
  });

  it('keys whose jobs are all scheduled later, or at their per-key cap, do not take the place of a key with due work', async () => {
    // 40 keys ahead of 'zz' in turn order, every job of theirs an hour away: more than one claim's window.
    await queue.enqueueMany(Array.from({ length: 40 }, (_, i) => ({ queue: 'fair-one', payload: { ms: 0 }, concurrencyKey: `later-${String(i).padStart(2, '0')}`, delayMs: 3_600_000 })));
    await queue.enqueueMany(Array.from({ length: 30 }, () => ({ queue: 'fair-one', payload: { ms: 0 }, concurrencyKey: 'zz' })));
    await waitFor('the due key done', async () => (await doneCount(db, 'fair-one', 'zz')()) === 30, 15_000);
  });

  it('weights stored at runtime win over the option from the next claim on, and go back to it when removed', async () => {
    await queue.setFairnessWeights('fair-live', { a: 1, b: 3 });
    expect(await queue.fairnessWeights('fair-live')).toEqual({ a: 1, b: 3 });
    const { rows: t0 } = await db.query<{ t: Date }>(`SELECT now() AS t`);
    await queue.enqueueMany([
      ...Array.from({ length: 120 }, () => ({ queue: 'fair-live', payload: { ms: 20 }, concurrencyKey: 'a' })),
      ...Array.from({ length: 300 }, () => ({ queue: 'fair-live', payload: { ms: 20 }, concurrencyKey: 'b' })),
    ]);
    await waitFor('all done', async () => (await doneCount(db, 'fair-live')()) === 420, 60_000);
    // Claims (locked_at) before the first key ran out: b, stored at 3, got three times a's (stored at 1, option 3).
    const { rows } = await db.query<{ k: string; n: number }>(
      `WITH last AS (SELECT min(m) AS t FROM (SELECT max(locked_at) AS m FROM background_jobs WHERE queue_name = 'fair-live' GROUP BY concurrency_key) AS x)
       SELECT concurrency_key AS k, count(*)::int AS n FROM background_jobs, last WHERE queue_name = 'fair-live' AND locked_at >= $1 AND locked_at < last.t GROUP BY concurrency_key`,
      [t0[0].t],
    );
    const starts = Object.fromEntries(rows.map((r) => [r.k, r.n]));
    console.log(`fair share with weights stored at runtime (b 3, a 1): ${JSON.stringify(starts)}`);
    expect(starts.b / starts.a).toBeGreaterThanOrEqual(2.5);
    expect(starts.b / starts.a).toBeLessThanOrEqual(3.5);
    await queue.setFairnessWeights('fair-live', { a: null, b: null });
    expect(await queue.fairnessWeights('fair-live')).toEqual({});
  });

  it('a key whose share is under one slot still gets it (weights 5, 5, 5, 5 and 1 over 4 slots)', async () => {
    await queue.setFairnessWeights('fair-live', { a: 5, b: 5, c: 5, d: 5, e: 1 });
    const { rows: t0 } = await db.query<{ t: Date }>(`SELECT now() AS t`);
    await queue.enqueueMany(['a', 'b', 'c', 'd', 'e'].flatMap((k) => Array.from({ length: 100 }, () => ({ queue: 'fair-live', payload: { ms: 5 }, concurrencyKey: k }))));
    await waitFor('all done', async () => (await doneCount(db, 'fair-live')()) === 420 + 500, 60_000);
    // Claims while every key had work (before the first key ran out): e's share is 1 in 21.
    const { rows } = await db.query<{ k: string; n: number }>(
      `WITH mine AS (SELECT * FROM background_jobs WHERE queue_name = 'fair-live' AND locked_at >= $1),
            last AS (SELECT min(m) AS t FROM (SELECT max(locked_at) AS m FROM mine GROUP BY concurrency_key) AS x)
       SELECT concurrency_key AS k, count(*)::int AS n FROM mine, last WHERE locked_at < last.t GROUP BY concurrency_key`,
      [t0[0].t],
    );
    const starts = Object.fromEntries(rows.map((r) => [r.k, r.n]));
    const total = Object.values(starts).reduce((a, b) => a + b, 0);
    console.log(`fair share 5:5:5:5:1 over 4 slots: ${JSON.stringify(starts)} while every key had work`);
    expect(starts.e / total).toBeGreaterThanOrEqual(0.5 / 21);
    expect(starts.e / total).toBeLessThanOrEqual(2 / 21);
    await queue.setFairnessWeights('fair-live', { a: null, b: null, c: null, d: null, e: null });
  });

  it('fairness.key keys a job enqueued without a concurrencyKey; a key function that throws refuses the enqueue', async () => {
    const id = await queue.enqueue('fair-keyed-by-payload', { tenant: 'acme' });
    const explicit = await queue.enqueue('fair-keyed-by-payload', { tenant: 'acme' }, { concurrencyKey: 'given' });
    const { rows } = await db.query<{ id: string; k: string }>(`SELECT id::text, concurrency_key AS k FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id`, [[id, explicit]]);
    expect(rows.map((r) => r.k)).toEqual(['tenant-acme', 'given']);
    const before = await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'fair-keyed-by-payload'`);
    await expect(queue.enqueue('fair-keyed-by-payload', null as unknown as { tenant: string })).rejects.toThrow(/fairness\.key threw/);
    await expect(queue.enqueueMany([{ queue: 'fair-keyed-by-payload', payload: { tenant: 'ok' } }, { queue: 'fair-keyed-by-payload', payload: null }])).rejects.toThrow(/fairness\.key threw/);
    const after = await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'fair-keyed-by-payload'`);
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it('refuses bad weights, storing none of the call', async () => {
    await queue.setFairnessWeights('fair-live', { kept: 2 });
    for (const bad of [{ x: 0 }, { x: 1.5 }, { x: 1001 }, { x: '2' }, { '': 2 }]) {
      await expect(queue.setFairnessWeights('fair-live', { ok: 5, ...bad } as never)).rejects.toThrow(/setFairnessWeights\("fair-live"\)/);
    }
    for (const bad of [{}, null, [1]]) await expect(queue.setFairnessWeights('fair-live', bad as never)).rejects.toThrow(/weights/);
    expect(await queue.fairnessWeights('fair-live')).toEqual({ kept: 2 });
    await queue.setFairnessWeights('fair-live', { kept: null });
  });

  it('refuses a bad fairness option at boot', async () => {
    for (const [fairness, message] of [
      [{ weights: { a: 0 } }, /fairness\.weights\["a"\]/],
      [{ defaultWeight: 2.5 }, /fairness\.defaultWeight/],
      [{ key: 'tenant' }, /fairness\.key/],
      [{ weigths: {} }, /Unknown .*fairness option "weigths"/],
      [false, /fairness/],
    ] as const) {
      await expect(startApp(url, { queue: { queues: { 'fair-one': { fairness: fairness as never } }, workers: false } })).rejects.toThrow(message);
    }
  });
});
