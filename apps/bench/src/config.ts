/**
 * Sizes of every scenario, per profile. `default` is what `npm run bench` runs (3 runs, about 20 minutes on
 * a 2-core machine); `quick` is for development (seconds per scenario); `full` adds the 1M-job backlog and
 * pushes 1M jobs through the steady-state scenario, as the issue asks, at the cost of about an hour.
 */
export interface Profile {
  name: 'quick' | 'default' | 'full';
  runs: number;
  enqueue: { sequential: number; concurrent: number; callers: number; bulk: number; bulkBatch: number };
  process: { jobs: number; concurrencies: number[] };
  latency: { jobs: number; intervalMs: number; concurrency: number };
  backlog: { sizes: number[]; claims: number; concurrency: number };
  steady: { jobs: number; wave: number; chunk: number; concurrency: number; idleWindowMs: number };
  scaleOut: { processes: number[]; jobs: number; concurrency: number };
  /** nestjs-pg-queue's limits across instances: `processes` workers at `concurrency`, no prefetch; per-key jobs over `keys` keys. */
  limits: { jobs: number; processes: number; concurrency: number; global: number[]; keys: number };
}

export const PROFILES: Record<Profile['name'], Profile> = {
  quick: {
    name: 'quick',
    runs: 1,
    enqueue: { sequential: 300, concurrent: 1_600, callers: 16, bulk: 5_000, bulkBatch: 1_000 },
    process: { jobs: 5_000, concurrencies: [10, 50] },
    latency: { jobs: 100, intervalMs: 10, concurrency: 10 },
    backlog: { sizes: [10_000], claims: 2_000, concurrency: 50 },
    steady: { jobs: 10_000, wave: 5_000, chunk: 1_000, concurrency: 50, idleWindowMs: 5_000 },
    scaleOut: { processes: [1, 2], jobs: 5_000, concurrency: 10 },
    limits: { jobs: 5_000, processes: 2, concurrency: 10, global: [20, 5], keys: 1_000 },
  },
  default: {
    name: 'default',
    runs: 3,
    enqueue: { sequential: 1_000, concurrent: 2_000, callers: 16, bulk: 20_000, bulkBatch: 1_000 },
    process: { jobs: 20_000, concurrencies: [10, 50] },
    latency: { jobs: 500, intervalMs: 10, concurrency: 10 },
    backlog: { sizes: [10_000, 100_000], claims: 5_000, concurrency: 50 },
    steady: { jobs: 50_000, wave: 10_000, chunk: 1_000, concurrency: 50, idleWindowMs: 10_000 },
    scaleOut: { processes: [1, 2, 4], jobs: 10_000, concurrency: 10 },
    limits: { jobs: 10_000, processes: 2, concurrency: 10, global: [20, 5], keys: 1_000 },
  },
  full: {
    name: 'full',
    runs: 3,
    enqueue: { sequential: 1_000, concurrent: 4_000, callers: 16, bulk: 20_000, bulkBatch: 1_000 },
    process: { jobs: 20_000, concurrencies: [10, 50] },
    latency: { jobs: 500, intervalMs: 10, concurrency: 10 },
    backlog: { sizes: [10_000, 100_000, 1_000_000], claims: 5_000, concurrency: 50 },
    steady: { jobs: 1_000_000, wave: 10_000, chunk: 1_000, concurrency: 50, idleWindowMs: 30_000 },
    scaleOut: { processes: [1, 2, 4], jobs: 20_000, concurrency: 10 },
    limits: { jobs: 20_000, processes: 2, concurrency: 10, global: [20, 5], keys: 1_000 },
  },
};

export const SCENARIOS = ['enqueue', 'process', 'latency', 'backlog', 'steady', 'scaleout', 'limits'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

/** Pool size for a worker of this concurrency, the same for every system (graphile-worker's advice). */
export function workerPoolSize(concurrency: number): number {
  return Math.max(10, concurrency + 2);
}

/** Producers get enough connections for the 16 concurrent callers. */
export const PRODUCER_POOL_SIZE = 20;
