/**
 * Sizes of every scenario, per profile. `default` is what `npm run bench` runs (5 runs; see
 * docs/performance.md for what it costs); `quick` is for development (seconds per scenario); `full` adds the
 * 1M-job backlog and pushes 1M jobs through the steady-state scenario, as the issue asks.
 */
export interface Profile {
  name: 'quick' | 'default' | 'full';
  runs: number;
  /**
   * `bulk` jobs per size in `bulkBatches` (jobs per call, ids returned); `concurrent` jobs from `callers` callers, one job
   * per transaction. `warmMs`: the interleaved scenario's one-at-a-time calls, untimed, between its fresh-process cell and
   * its warm one.
   */
  enqueue: { sequential: number; concurrent: number; callers: number; bulk: number; bulkBatches: number[]; warmMs: number };
  process: { jobs: number; concurrencies: number[] };
  /** nestjs-pg-queue with a bare handler's settings next to the tuned ones: no-op jobs at each concurrency. */
  defaults: { jobs: number; concurrencies: number[] };
  /** `processes` workers at `concurrency` each, jobs of each duration: throughput and each process's share of the jobs. */
  spread: { processes: number; concurrency: number; durations: { jobMs: number; jobs: number }[] };
  latency: { jobs: number; intervalMs: number; concurrency: number };
  backlog: { sizes: number[]; claims: number; concurrency: number };
  steady: { jobs: number; wave: number; chunk: number; concurrency: number; idleWindowMs: number };
  scaleOut: { processes: number[]; jobs: number; concurrency: number };
  /** nestjs-pg-queue's limits across instances: `processes` workers at `concurrency`, no prefetch; per-key jobs over `keys` keys. */
  limits: { jobs: number; processes: number; concurrency: number; global: number[]; keys: number };
  /**
   * Flows (jobs that depend on jobs): `chains` chains of `chainLength`, `fans` fan-outs of `fanWidth` then
   * fan-ins, `diamonds` diamonds, each shape its own cell, one worker process at each concurrency.
   */
  flows: { chains: number; chainLength: number; fans: number; fanWidth: number; diamonds: number; concurrencies: number[] };
  /**
   * Fair share across keys (nestjs-pg-queue's `fairness`): `processes` workers at `concurrency`, handlers sleeping
   * `jobMs`. Tenants: one key with `bigJobs` due jobs, then `smallTenants` keys of `smallJobs` each. Throughput: `jobs`
   * of one key. Weights 3:1: `weightedJobs` jobs of each of two keys.
   */
  fairness: { processes: number; concurrency: number; jobMs: number; bigJobs: number; smallTenants: number; smallJobs: number; jobs: number; weightedJobs: number };
  /** Memory: one worker process's RSS and V8 heap after boot and after `jobs` no-op jobs through (enqueued by itself). */
  memory: { jobs: number; concurrency: number };
}

export const PROFILES: Record<Profile['name'], Profile> = {
  quick: {
    name: 'quick',
    runs: 1,
    enqueue: { sequential: 300, concurrent: 1_600, callers: 16, bulk: 10_000, bulkBatches: [1_000, 10_000], warmMs: 1_000 },
    process: { jobs: 5_000, concurrencies: [10, 50] },
    defaults: { jobs: 5_000, concurrencies: [10, 50] },
    spread: { processes: 4, concurrency: 10, durations: [{ jobMs: 50, jobs: 2_000 }, { jobMs: 2_000, jobs: 80 }] },
    latency: { jobs: 100, intervalMs: 10, concurrency: 10 },
    backlog: { sizes: [10_000], claims: 2_000, concurrency: 50 },
    steady: { jobs: 10_000, wave: 5_000, chunk: 1_000, concurrency: 50, idleWindowMs: 5_000 },
    scaleOut: { processes: [1, 2], jobs: 5_000, concurrency: 10 },
    limits: { jobs: 5_000, processes: 2, concurrency: 10, global: [20, 5], keys: 1_000 },
    flows: { chains: 50, chainLength: 10, fans: 2, fanWidth: 1_000, diamonds: 100, concurrencies: [10] },
    fairness: { processes: 2, concurrency: 10, jobMs: 10, bigJobs: 20_000, smallTenants: 50, smallJobs: 20, jobs: 5_000, weightedJobs: 2_000 },
    memory: { jobs: 20_000, concurrency: 50 },
  },
  default: {
    name: 'default',
    runs: 5,
    enqueue: { sequential: 1_000, concurrent: 4_000, callers: 16, bulk: 40_000, bulkBatches: [1_000, 10_000], warmMs: 8_000 },
    process: { jobs: 20_000, concurrencies: [10, 50] },
    defaults: { jobs: 20_000, concurrencies: [10, 50] },
    // 4 x 10 slots turn over 800 jobs/s of 50 ms, 20 jobs/s of 2 s: about 20 s each when spread evenly, longer when not.
    spread: { processes: 4, concurrency: 10, durations: [{ jobMs: 50, jobs: 16_000 }, { jobMs: 2_000, jobs: 400 }] },
    latency: { jobs: 500, intervalMs: 10, concurrency: 10 },
    backlog: { sizes: [10_000, 100_000], claims: 5_000, concurrency: 50 },
    steady: { jobs: 50_000, wave: 10_000, chunk: 1_000, concurrency: 50, idleWindowMs: 10_000 },
    scaleOut: { processes: [1, 2, 4], jobs: 10_000, concurrency: 10 },
    limits: { jobs: 10_000, processes: 2, concurrency: 10, global: [20, 5], keys: 1_000 },
    flows: { chains: 200, chainLength: 10, fans: 4, fanWidth: 1_000, diamonds: 500, concurrencies: [10, 50] },
    fairness: { processes: 2, concurrency: 10, jobMs: 10, bigJobs: 100_000, smallTenants: 50, smallJobs: 20, jobs: 20_000, weightedJobs: 4_000 },
    memory: { jobs: 200_000, concurrency: 50 },
  },
  full: {
    name: 'full',
    runs: 3,
    enqueue: { sequential: 1_000, concurrent: 4_000, callers: 16, bulk: 40_000, bulkBatches: [1_000, 10_000], warmMs: 8_000 },
    process: { jobs: 20_000, concurrencies: [10, 50] },
    defaults: { jobs: 20_000, concurrencies: [10, 50] },
    spread: { processes: 4, concurrency: 10, durations: [{ jobMs: 50, jobs: 16_000 }, { jobMs: 2_000, jobs: 400 }] },
    latency: { jobs: 500, intervalMs: 10, concurrency: 10 },
    backlog: { sizes: [10_000, 100_000, 1_000_000], claims: 5_000, concurrency: 50 },
    steady: { jobs: 1_000_000, wave: 10_000, chunk: 1_000, concurrency: 50, idleWindowMs: 30_000 },
    scaleOut: { processes: [1, 2, 4], jobs: 20_000, concurrency: 10 },
    limits: { jobs: 20_000, processes: 2, concurrency: 10, global: [20, 5], keys: 1_000 },
    flows: { chains: 200, chainLength: 10, fans: 4, fanWidth: 1_000, diamonds: 500, concurrencies: [10, 50] },
    fairness: { processes: 2, concurrency: 10, jobMs: 10, bigJobs: 100_000, smallTenants: 50, smallJobs: 20, jobs: 20_000, weightedJobs: 4_000 },
    memory: { jobs: 1_000_000, concurrency: 50 },
  },
};

export const SCENARIOS = ['enqueue', 'interleaved', 'process', 'defaults', 'spread', 'latency', 'backlog', 'steady', 'scaleout', 'limits', 'flows', 'fairness', 'modes', 'memory'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

/** Pool size for a worker of this concurrency, the same for every system (graphile-worker's advice). */
export function workerPoolSize(concurrency: number): number {
  return Math.max(10, concurrency + 2);
}

/** Producers get enough connections for the 16 concurrent callers. */
export const PRODUCER_POOL_SIZE = 20;
