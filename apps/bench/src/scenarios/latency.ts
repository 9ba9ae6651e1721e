import { workerPoolSize } from '../config.js';
import { withFreshDatabase } from '../db/databases.js';
import { sleep } from '../host/clock.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';

/** Long enough for every system to be past its start-up work and idle (pg-boss settles its queue cache). */
const IDLE_MS = 2_000;

/**
 * Start latency with idle workers: jobs enqueued one at a time, 10 ms apart (the app and the worker in one
 * process, as in a Nest app); each job's latency is its handler's start minus the moment just before its
 * enqueue call. Percentiles by nearest rank.
 */
export async function latencyScenario(ctx: ScenarioContext, system: SystemInfo): Promise<Figures> {
  const { jobs, intervalMs, concurrency } = ctx.profile.latency;
  return withFreshDatabase(ctx.serverUrl, databaseName('lat', system.id, ctx.run), async (url) => {
    const worker = await SystemProcess.start({ system: system.id, url, role: 'worker', concurrency, poolSize: workerPoolSize(concurrency) });
    try {
      await sleep(IDLE_MS);
      const samples = await worker.send({ cmd: 'latency', n: jobs, intervalMs, timeoutMs: 60_000 });
      if (samples.length < jobs) ctx.log(`  ${system.id}: only ${samples.length} of ${jobs} latency jobs started within 60 s`);
      const sorted = [...samples].sort((a, b) => a - b);
      return {
        'latency.p50': percentile(sorted, 50),
        'latency.p95': percentile(sorted, 95),
        'latency.p99': percentile(sorted, 99),
        'latency.max': sorted[sorted.length - 1] ?? NaN,
      };
    } finally {
      await worker.stop();
    }
  });
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}
