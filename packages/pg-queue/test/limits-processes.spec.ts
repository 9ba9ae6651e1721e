import { describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { LimitsFleet, maxOverlap, sampleRunning } from './limits/limits-fleet.js';
import { LIMITS_MAINTENANCE, setUpLimits, tearDownLimits, useLimitsWorkerBuild } from './limits/limits-setup.js';
import { waitFor } from './support/test-app.js';

// Limits across instances, read back from what the handlers of real OS processes recorded (limit_runs).

const workerScript = useLimitsWorkerBuild();

const completed = (db: pg.Pool, queue: string) => async () => {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = $1 AND status = 'completed'`, [queue]);
  return rows[0].n;
};

describe('limits across OS processes', () => {
  it('globalConcurrency 3 over 4 processes: never more than 3 runs at once, through SIGKILLs and the sweeper', async () => {
    const s = await setUpLimits('limglobal');
    const fleet = new LimitsFleet(workerScript(), s.url, {
      leaseMs: 1_500,
      heartbeatMs: 300,
      maintenance: LIMITS_MAINTENANCE,
      queues: { global: { concurrency: 3, globalConcurrency: 3, backoff: { baseMs: 10, maxMs: 50 } } },
    });
    const sampler = sampleRunning(s.db, 'global');
    try {
      // Each kill round enqueues its own wave and picks its victim while that wave is running: with one batch
      // enqueued up front, a slow restart on a loaded machine let the other processes finish every job before
      // the second round looked for a holder.
      const wave = 100;
      const rounds = 2;
      const jobs = wave * (rounds + 1);
      // Each wave's first job runs 3 s: the victim is a process running it, so the kill always cuts a run mid-flight
      // (a 20-80 ms job could finish between the pick and the kill on a slow machine, and then no run was cut).
      const LONG_MS = 3_000;
      const enqueueWave = () => s.queue.enqueueMany(Array.from({ length: wave }, (_, i) => ({ queue: 'global', payload: { ms: i === 0 ? LONG_MS : 20 + (i % 7) * 10 } })));
      await enqueueWave();
      await fleet.start(4);
      // Two processes die holding jobs: their rows stay `processing` (slots taken) until the sweeper puts them back.
      for (let round = 0; round < rounds; round++) {
        if (round > 0) await enqueueWave();
        await waitFor('jobs running', async () => (await completed(s.db, 'global')()) >= wave * round + 20, 60_000);
        const victim = await waitFor('a process running a long job', async () => {
          const { rows } = await s.db.query<{ w: string }>(
            `SELECT locked_by AS w FROM background_jobs WHERE queue_name = 'global' AND status = 'processing' AND NOT buffered AND (payload->>'ms')::int = $1`,
            [LONG_MS],
          );
          return fleet.live.find((w) => rows.some((r) => r.w === w.workerId));
        }, 60_000, 5);
        await fleet.kill(victim, s.db);
        await fleet.startOne();
      }
      await enqueueWave();
      await waitFor(`all ${jobs} jobs completed`, async () => (await completed(s.db, 'global')()) === jobs, 90_000, 100);
      const mostProcessing = await sampler.stop();

      const overlap = (await maxOverlap(s.db, 'global')).get('global');
      const { rows: [runs] } = await s.db.query<{ total: number; killed: number; workers: number }>(
        `SELECT count(*)::int AS total, count(*) FILTER (WHERE ended_at IS NULL)::int AS killed, count(DISTINCT worker)::int AS workers FROM limit_runs`,
      );
      console.log(`globalConcurrency 3: ${runs.total} runs on ${runs.workers} processes (${runs.killed} cut by SIGKILL), most at once: ${overlap} (most processing rows sampled: ${mostProcessing})`);
      expect(overlap).toBeLessThanOrEqual(3);
      expect(mostProcessing).toBeLessThanOrEqual(3);
      expect(overlap).toBe(3); // the limit is used, not just respected
      // Two processes were killed while running a 3 s job: each kill cut a run mid-flight.
      expect(runs.killed).toBeGreaterThanOrEqual(rounds);
      expect(runs.workers).toBeGreaterThanOrEqual(4);
    } finally {
      await sampler.stop();
      await tearDownLimits(s, fleet);
    }
  }, 180_000);

  it('globalConcurrency 3 through a freeze past the lease: the sweeper hands the slot on once, the late outcome frees nothing', async () => {
    const s = await setUpLimits('limfreeze');
    const fleet = new LimitsFleet(workerScript(), s.url, {
      leaseMs: 1_200,
      heartbeatMs: 300,
      maintenance: LIMITS_MAINTENANCE,
      queues: { global: { concurrency: 3, globalConcurrency: 3 } },
    });
    let sampler: ReturnType<typeof sampleRunning> | undefined;
    try {
      const jobs = 30;
      await s.queue.enqueueMany(Array.from({ length: jobs }, () => ({ queue: 'global', payload: { ms: 400 } })));
      await fleet.start(3);
      sampler = sampleRunning(s.db, 'global');
      // The jobs the frozen process holds are read after the freeze: one it settled between a read before the freeze
      // and the signal (its 400 ms ran out then) is completed, and would never run elsewhere (CI, 2026-12-07: the
      // wait below timed out). An outcome already on its way gets 300 ms to land first.
      const holding = async (workerId: string) =>
        (await s.db.query<{ id: string }>(`SELECT id::text FROM background_jobs WHERE queue_name = 'global' AND status = 'processing' AND locked_by = $1`, [workerId])).rows.map((r) => r.id);
      const held = await waitFor('a process frozen while it holds a job', async () => {
        const { rows } = await s.db.query<{ w: string }>(`SELECT DISTINCT locked_by AS w FROM background_jobs WHERE queue_name = 'global' AND status = 'processing'`);
        const worker = fleet.live.find((p) => rows.some((r) => r.w === p.workerId));
        if (!worker) return undefined;
        fleet.freeze(worker);
        await new Promise((resolve) => setTimeout(resolve, 300));
        const ids = await holding(worker.workerId);
        if (ids.length) return { worker, ids };
        fleet.resume(worker);
        return undefined;
      }, 60_000, 5);
      // Its lease runs out, the sweeper puts its jobs back, and the other processes run them.
      await waitFor('the frozen jobs run elsewhere', async () => {
        const { rows } = await s.db.query(`SELECT 1 FROM limit_runs WHERE job_id = ANY($1::int8[]) AND worker <> $2`, [held.ids, held.worker.workerId]);
        return rows.length === held.ids.length;
      }, 60_000, 20);
      fleet.resume(held.worker);
      await waitFor(`all ${jobs} jobs completed`, async () => (await completed(s.db, 'global')()) === jobs, 60_000, 50);
      const mostProcessing = await sampler.stop();
      // Each held job ran once elsewhere. On the frozen process it ran too if its handler had started before the
      // freeze; if the freeze came between the claim and the process reading its answer, the claim starts nothing
      // on resume (QueueWorker.accept: a claim answered more than half a lease late).
      const { rows: [late] } = await s.db.query<{ elsewhere: number; frozen: number; most_frozen: number; completed_once: boolean }>(
        `SELECT (SELECT count(*)::int FROM limit_runs WHERE job_id = ANY($1::int8[]) AND worker <> $2) AS elsewhere,
                (SELECT count(*)::int FROM limit_runs WHERE job_id = ANY($1::int8[]) AND worker = $2) AS frozen,
                (SELECT coalesce(max(n), 0)::int FROM (SELECT count(*) AS n FROM limit_runs WHERE job_id = ANY($1::int8[]) AND worker = $2 GROUP BY job_id) AS c) AS most_frozen,
                (SELECT bool_and(status = 'completed' AND attempts = 2) FROM background_jobs WHERE id = ANY($1::int8[])) AS completed_once`,
        [held.ids, held.worker.workerId],
      );
      const overlap = (await maxOverlap(s.db, 'global')).get('global');
      console.log(`freeze: ${held.ids.length} job(s) swept from the frozen process and run again (${late.frozen} of them had started there); most processing rows sampled: ${mostProcessing}; most runs at once by the handlers' records, the frozen ones included until they noticed: ${overlap}`);
      expect(mostProcessing).toBeLessThanOrEqual(3);
      expect(late.elsewhere).toBe(held.ids.length);
      expect(late.most_frozen).toBeLessThanOrEqual(1);
      expect(late.completed_once).toBe(true); // the second attempt's outcome stands; the frozen one's was fenced out
    } finally {
      await sampler?.stop(); // before its pool ends (a failed wait above left it sampling)
      await tearDownLimits(s, fleet);
    }
  }, 150_000);

  it('globalConcurrency 8 over 3 processes of batch handlers (calls of up to 5): never more than 8 jobs run at once, each once', async () => {
    const s = await setUpLimits('limbatch');
    const fleet = new LimitsFleet(workerScript(), s.url, {
      leaseMs: 3_000,
      heartbeatMs: 500,
      maintenance: LIMITS_MAINTENANCE,
      // Two calls at once per process, up to 5 jobs a call: 30 jobs could run across the 3 processes without the limit.
      queues: { globalbatch: { concurrency: 2, globalConcurrency: 8 } },
    });
    const sampler = sampleRunning(s.db, 'globalbatch');
    try {
      const jobs = 120;
      await s.queue.enqueueMany(Array.from({ length: jobs }, (_, i) => ({ queue: 'globalbatch', payload: { ms: 30 + (i % 5) * 20 } })));
      await fleet.start(3);
      await waitFor(`all ${jobs} jobs completed`, async () => (await completed(s.db, 'globalbatch')()) === jobs, 90_000, 100);
      const mostProcessing = await sampler.stop();
      const overlap = (await maxOverlap(s.db, 'globalbatch')).get('globalbatch');
      const { rows: [runs] } = await s.db.query<{ total: number; jobs: number; workers: number; biggest: number }>(
        `SELECT count(*)::int AS total, count(DISTINCT job_id)::int AS jobs, count(DISTINCT worker)::int AS workers,
                (SELECT max(n)::int FROM (SELECT count(*) AS n FROM limit_runs WHERE queue = 'globalbatch' GROUP BY worker, call_no) AS c) AS biggest
         FROM limit_runs WHERE queue = 'globalbatch'`,
      );
      console.log(`batch + globalConcurrency 8: ${runs.total} runs of ${runs.jobs} jobs on ${runs.workers} processes, biggest call ${runs.biggest}, most at once: ${overlap} (most processing rows sampled: ${mostProcessing})`);
      expect(overlap).toBeLessThanOrEqual(8);
      expect(mostProcessing).toBeLessThanOrEqual(8);
      expect(overlap).toBeGreaterThanOrEqual(5); // the limit is used, not just respected
      expect([runs.total, runs.jobs]).toEqual([jobs, jobs]); // each job ran once
      // Calls of several jobs (the jobs of a call share their call_no), never past batch.size.
      expect(runs.biggest).toBeGreaterThanOrEqual(2);
      expect(runs.biggest).toBeLessThanOrEqual(5);
    } finally {
      await sampler.stop();
      await tearDownLimits(s, fleet);
    }
  }, 180_000);

  it('rateLimit 10 per 500 ms over 3 processes: no window of 500 ms holds more than 10 starts', async () => {
    const s = await setUpLimits('limrate');
    const fleet = new LimitsFleet(workerScript(), s.url, {
      maintenance: LIMITS_MAINTENANCE,
      queues: { rated: { concurrency: 8, rateLimit: { max: 10, intervalMs: 500 } } },
    });
    try {
      const jobs = 60;
      await fleet.start(3);
      await s.queue.enqueueMany(Array.from({ length: jobs }, () => ({ queue: 'rated', payload: { ms: 5 } })));
      await waitFor(`all ${jobs} jobs completed`, async () => (await completed(s.db, 'rated')()) === jobs, 60_000, 50);

      // For every start, the starts in the 500 ms from it (claimed_at: the claim, which the limit counts).
      const { rows: [w] } = await s.db.query<{ most: number; span_ms: number; workers: number }>(
        `SELECT (SELECT max((SELECT count(*) FROM limit_runs AS b WHERE b.claimed_at >= a.claimed_at AND b.claimed_at < a.claimed_at + interval '500 ms'))::int FROM limit_runs AS a) AS most,
                (extract(epoch FROM max(claimed_at) - min(claimed_at)) * 1000)::float8 AS span_ms,
                count(DISTINCT worker)::int AS workers
         FROM limit_runs`,
      );
      console.log(`rateLimit 10/500 ms: ${jobs} starts over ${Math.round(w.span_ms)} ms on ${w.workers} processes; most claims in a 500 ms window: ${w.most}`);
      expect(w.most).toBeLessThanOrEqual(10);
      // 60 starts at 10 per 500 ms: the last window opens no sooner than 2.5 s after the first; and not much later.
      expect(w.span_ms).toBeGreaterThanOrEqual(2_400);
      expect(w.span_ms).toBeLessThan(8_000);
      expect(w.workers).toBeGreaterThanOrEqual(2);
    } finally {
      await tearDownLimits(s, fleet);
    }
  }, 120_000);

  it('concurrencyPerKey 1 over 4 processes: each key serial and in order, and a key with a backlog starves none of the 20 others', async () => {
    const s = await setUpLimits('limkeys');
    const fleet = new LimitsFleet(workerScript(), s.url, { maintenance: LIMITS_MAINTENANCE, queues: { keyed: { concurrency: 4, concurrencyPerKey: 1 } } });
    try {
      // The backlog first: a plain queue would run its 100 jobs before any other key's.
      await s.queue.enqueueMany(Array.from({ length: 100 }, () => ({ queue: 'keyed', payload: { ms: 10 }, concurrencyKey: 'backlog' })));
      const keys = Array.from({ length: 20 }, (_, i) => `tenant:${i}`);
      await s.queue.enqueueMany(keys.flatMap((key) => Array.from({ length: 5 }, () => ({ queue: 'keyed', payload: { ms: 10 }, concurrencyKey: key }))));
      await fleet.start(4);
      await waitFor('all 200 jobs completed', async () => (await completed(s.db, 'keyed')()) === 200, 90_000, 100);

      const overlap = await maxOverlap(s.db, 'keyed', true);
      expect(overlap.size).toBe(21);
      expect(Math.max(...overlap.values())).toBe(1);
      // In order: within each key, runs started in job order (enqueue order; one run per job here).
      const { rows: disorder } = await s.db.query(
        `SELECT concurrency_key FROM (
           SELECT concurrency_key, job_id, lag(job_id) OVER (PARTITION BY concurrency_key ORDER BY started_at) AS before FROM limit_runs
         ) AS r WHERE before > job_id`,
      );
      expect(disorder).toEqual([]);
      // Not starved: every other key finished all its jobs before the backlog key had run a third of its own.
      const { rows: [f] } = await s.db.query<{ last_other: Date; backlog_third: Date; others_first_ms: number; workers: number }>(
        `SELECT (SELECT max(ended_at) FROM limit_runs WHERE concurrency_key <> 'backlog') AS last_other,
                (SELECT started_at FROM limit_runs WHERE concurrency_key = 'backlog' ORDER BY started_at OFFSET 33 LIMIT 1) AS backlog_third,
                (SELECT extract(epoch FROM max(first) - min(first)) * 1000 FROM (SELECT min(started_at) AS first FROM limit_runs GROUP BY concurrency_key) AS k)::float8 AS others_first_ms,
                (SELECT count(DISTINCT worker)::int FROM limit_runs) AS workers`,
      );
      console.log(`concurrencyPerKey 1: 21 keys on ${f.workers} processes; first starts of all keys within ${Math.round(f.others_first_ms)} ms`);
      expect(f.last_other.getTime()).toBeLessThan(f.backlog_third.getTime());
      expect(f.workers).toBeGreaterThanOrEqual(2);
    } finally {
      await tearDownLimits(s, fleet);
    }
  }, 150_000);
});
