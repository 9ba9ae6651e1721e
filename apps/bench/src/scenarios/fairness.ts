import type { BenchLimits } from '../adapters/types.js';
import { workerPoolSize } from '../config.js';
import { checkpoint, deadlockCount, withFreshDatabase } from '../db/databases.js';
import { withClient } from '../db/sql.js';
import { nowMs, sleep } from '../host/clock.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';
import { SETTLE_MS } from './process.js';
import { waitUntilDone } from './wait-until-done.js';

/**
 * Fair share across keys (issue 42, part 1), nestjs-pg-queue only: no peer has an open-source fair share (BullMQ's
 * groups are BullMQ Pro's, paid; Hatchet is a separate engine). Three shapes, each with `processes` worker processes
 * at `concurrency` and handlers that sleep `jobMs`, every figure read back from background_jobs (the database's clock):
 * - `tenants`: one key with a large due backlog, then many small keys enqueued behind it; each small key's last job's
 *   finish, from the moment the small keys were enqueued, against the time its jobs would take alone on its fair share
 *   of the slots (jobs x jobMs x keys with work / slots). The worst key is the figure.
 * - `only`: one key has all the work: throughput with fairness against the same queue without it (no read-ahead, and
 *   the library's default read-ahead) and with concurrencyPerKey (the keyed claim), to see that one key alone gets
 *   every slot.
 * - `weights`: two keys of weights 3 and 1, both backlogged: the share of runs while both have work.
 */
export type FairnessShape = 'tenants' | 'only' | 'weights';

export interface FairnessVariant {
  metric: string;
  shape: FairnessShape;
  limits: BenchLimits;
  /** One process with all the slots instead of the profile's processes (the same slots): no turns at the queue's lock to wait for. */
  oneProcess?: boolean;
}

/** The weighted cell's two keys and their weights. */
const WEIGHTS = { heavy: 3, light: 1 };

export function fairnessVariants(profile: ScenarioContext['profile']): FairnessVariant[] {
  const slots = profile.fairness.processes * profile.fairness.concurrency;
  return [
    { metric: 'fair.tenants', shape: 'tenants', limits: { fairness: true } },
    // Throughput of one key alone: the references first (no fairness, without and with the default read-ahead), then
    // the keyed claim with a cap that never binds, then the fair claim.
    { metric: 'fair.only.plain', shape: 'only', limits: { prefetch: 0 } },
    { metric: 'fair.only.plainReadAhead', shape: 'only', limits: {} },
    { metric: 'fair.only.perKey', shape: 'only', limits: { concurrencyPerKey: slots } },
    { metric: 'fair.only.fair', shape: 'only', limits: { fairness: true } },
    // Fair share alone reads ahead by default (the claim holds the jobs past the free slots in the shares): without it too.
    { metric: 'fair.only.fairNoReadAhead', shape: 'only', limits: { fairness: true, prefetch: 0 } },
    // The same slots in one process: what the turns at the queue's lock between processes cost (the fair claim and the plain one).
    { metric: 'fair.only1p.plain', shape: 'only', limits: { prefetch: 0 }, oneProcess: true },
    { metric: 'fair.only1p.fair', shape: 'only', limits: { fairness: true }, oneProcess: true },
    { metric: 'fair.weights', shape: 'weights', limits: { fairness: { weights: WEIGHTS } } },
  ];
}

export function fairnessSupported(system: SystemInfo): boolean {
  return (system.limits ?? []).includes('fairness');
}

export async function fairnessScenario(ctx: ScenarioContext, system: SystemInfo, variant: FairnessVariant): Promise<Figures> {
  if (!fairnessSupported(system)) return {};
  const f = ctx.profile.fairness;
  const name = databaseName(variant.metric.replace(/\W/g, '').toLowerCase(), system.id, ctx.run);
  const [processes, concurrency] = variant.oneProcess ? [1, f.processes * f.concurrency] : [f.processes, f.concurrency];
  return withFreshDatabase(ctx.serverUrl, name, async (url) => {
    const start = () =>
      SystemProcess.start({ system: system.id, url, role: 'worker', concurrency, poolSize: workerPoolSize(concurrency), limits: variant.limits, jobMs: f.jobMs });
    const first = await start(); // creates the schema alone
    const workers = [first];
    let figures: Figures;
    try {
      for (let i = 1; i < processes; i++) workers.push(await start());
      await sleep(SETTLE_MS);
      await checkpoint(ctx.serverUrl);
      if (variant.shape === 'tenants') figures = await tenants(ctx, first, url, variant.metric);
      else if (variant.shape === 'only') figures = await onlyOneKey(ctx, workers, url, system, variant.metric);
      else figures = await weighted(ctx, first, url, variant.metric);
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
    figures[`${variant.metric}.deadlocks`] = await deadlockCount(ctx.serverUrl, name);
    return figures;
  });
}

const smallKey = (i: number) => `s${String(i).padStart(2, '0')}`;

/**
 * One big key's backlog (enqueued in calls of 5,000 while the workers already run it), then every small key's jobs in
 * one call. Waits until every small key's jobs finished, then reads, per small key, its last finish minus the small
 * keys' enqueue (their created_at), against its fair share: smallJobs x jobMs x (smallTenants + 1) / slots. The
 * measured variant of the same ratio uses the slots' measured turnover (all jobs finished in the window, per slot)
 * instead of jobMs: it leaves out the claim's and the settle's own time per job, and keeps only how the slots were shared.
 */
async function tenants(ctx: ScenarioContext, producer: SystemProcess, url: string, metric: string): Promise<Figures> {
  const f = ctx.profile.fairness;
  const slots = f.processes * f.concurrency;
  const keys = Array.from({ length: f.smallTenants }, (_, i) => smallKey(i));
  await producer.send({ cmd: 'enqueue-keyed', groups: [{ key: 'big', n: f.bigJobs }], batch: 5_000 });
  await producer.send({ cmd: 'enqueue-keyed', groups: keys.map((key) => ({ key, n: f.smallJobs })), batch: f.smallTenants * f.smallJobs });
  const deadline = nowMs() + 600_000;
  await withClient(url, async (c) => {
    // The small keys' unfinished jobs, through the keyed claim index (queued) and the limited index (processing).
    for (;;) {
      const { rows } = await c.query<{ left: number }>(
        `SELECT count(*)::int AS left FROM background_jobs WHERE queue_name = 'bench' AND status IN ('queued', 'processing') AND concurrency_key = ANY($1)`,
        [keys],
      );
      if (rows[0].left === 0) break;
      if (nowMs() > deadline) throw new Error(`timed out: ${rows[0].left} small-tenant jobs unfinished`);
      await sleep(200);
    }
  });
  return withClient(url, async (c) => {
    const { rows } = await c.query<{ key: string; ms: number; n: number }>(
      `WITH t0 AS (SELECT min(created_at) AS at FROM background_jobs WHERE concurrency_key = ANY($1))
       SELECT concurrency_key AS key, (extract(epoch FROM max(finished_at) - (SELECT at FROM t0)) * 1000)::float8 AS ms, count(*)::int AS n
       FROM background_jobs WHERE concurrency_key = ANY($1) AND status = 'completed' GROUP BY concurrency_key`,
      [keys],
    );
    if (rows.length !== f.smallTenants || rows.some((r) => r.n !== f.smallJobs)) throw new Error(`small tenants: expected ${f.smallTenants} keys of ${f.smallJobs} completed jobs, got ${JSON.stringify(rows.slice(0, 5))}...`);
    const window = await c.query<{ finished: number; big: number; ms: number }>(
      `WITH t0 AS (SELECT min(created_at) AS at FROM background_jobs WHERE concurrency_key = ANY($1)),
            t1 AS (SELECT max(finished_at) AS at FROM background_jobs WHERE concurrency_key = ANY($1))
       SELECT count(*)::int AS finished, count(*) FILTER (WHERE concurrency_key = 'big')::int AS big,
              (extract(epoch FROM (SELECT at FROM t1) - (SELECT at FROM t0)) * 1000)::float8 AS ms
       FROM background_jobs WHERE status = 'completed' AND finished_at > (SELECT at FROM t0) AND finished_at <= (SELECT at FROM t1)`,
      [keys],
    );
    const w = window.rows[0];
    const share = f.smallTenants + 1;
    const nominal = (f.smallJobs * f.jobMs * share) / slots;
    // The slots' measured turnover in the window: ms per job per slot.
    const slotMs = (w.ms * slots) / w.finished;
    const measured = (f.smallJobs * slotMs * share) / slots;
    const times = rows.map((r) => r.ms).sort((a, b) => a - b);
    const worst = times[times.length - 1];
    ctx.log(`  fairness tenants: small keys done in ${times[0].toFixed(0)}-${worst.toFixed(0)} ms (fair share ${nominal.toFixed(0)} ms at ${f.jobMs} ms a job, ${measured.toFixed(0)} ms at the measured ${slotMs.toFixed(1)} ms a job per slot); the big key ran ${w.big} of ${w.finished} jobs in that window`);
    return {
      [`${metric}.worstRatio`]: worst / nominal,
      [`${metric}.medianRatio`]: times[Math.floor(times.length / 2)] / nominal,
      [`${metric}.worstRatioMeasured`]: worst / measured,
      [`${metric}.worstMs`]: worst,
      [`${metric}.fairMs`]: nominal,
      [`${metric}.slotMsPerJob`]: slotMs,
      [`${metric}.bigShare`]: (w.big / w.finished) * 100,
    };
  });
}

/** `jobs` of one key, enqueued by the first worker while all run: jobs/s from the first start to the last finish. */
async function onlyOneKey(ctx: ScenarioContext, workers: SystemProcess[], url: string, system: SystemInfo, metric: string): Promise<Figures> {
  const { jobs } = ctx.profile.fairness;
  const enqueue = workers[0].send({ cmd: 'enqueue-keyed', groups: [{ key: 'big', n: jobs }], batch: 5_000 });
  const done = await waitUntilDone(workers, url, system.busySql, jobs, 600_000);
  await enqueue;
  return { [metric]: (jobs / (done.doneAt - done.firstAt)) * 1000, [`${metric}.extraRuns`]: done.handled - jobs };
}

/**
 * `weightedJobs` of each of two keys (weights 3 and 1) in one call, both backlogged from the same moment. The window
 * "both have work" ends when the first of the two keys has started its last job; the figure is the heavy key's starts
 * over the light key's in that window (3 is exact).
 */
async function weighted(ctx: ScenarioContext, producer: SystemProcess, url: string, metric: string): Promise<Figures> {
  const { weightedJobs } = ctx.profile.fairness;
  await producer.send({ cmd: 'enqueue-keyed', groups: [{ key: 'heavy', n: weightedJobs }, { key: 'light', n: weightedJobs }], batch: 2 * weightedJobs });
  const deadline = nowMs() + 600_000;
  return withClient(url, async (c) => {
    // Until one key has nothing queued (its last job started); then the window is over.
    for (;;) {
      const { rows } = await c.query<{ heavy: boolean; light: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM background_jobs WHERE queue_name = 'bench' AND status = 'queued' AND concurrency_key = 'heavy') AS heavy,
                EXISTS (SELECT 1 FROM background_jobs WHERE queue_name = 'bench' AND status = 'queued' AND concurrency_key = 'light') AS light`,
      );
      if (!rows[0].heavy || !rows[0].light) break;
      if (nowMs() > deadline) throw new Error('timed out: both keys still queued');
      await sleep(100);
    }
    const { rows } = await c.query<{ heavy: number; light: number }>(
      `WITH ends AS (SELECT concurrency_key, max(locked_at) AS last FROM background_jobs
                     WHERE queue_name = 'bench' AND locked_at IS NOT NULL GROUP BY concurrency_key),
            t1 AS (SELECT min(last) AS at FROM ends)
       SELECT count(*) FILTER (WHERE concurrency_key = 'heavy')::int AS heavy, count(*) FILTER (WHERE concurrency_key = 'light')::int AS light
       FROM background_jobs WHERE queue_name = 'bench' AND locked_at IS NOT NULL AND locked_at < (SELECT at FROM t1)`,
    );
    const { heavy, light } = rows[0];
    ctx.log(`  fairness weights 3:1: ${heavy} starts of the heavy key, ${light} of the light one while both had work`);
    return { [`${metric}.ratio`]: heavy / light, [`${metric}.heavyShare`]: (heavy / (heavy + light)) * 100 };
  });
}
