import { workerPoolSize } from '../config.js';
import { withFreshDatabase } from '../db/databases.js';
import { sleep } from '../host/clock.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';

/** Long enough for every system to be past its start-up work and idle (pg-boss settles its queue cache). */
const IDLE_MS = 2_000;

/**
 * Start latency with idle workers: jobs enqueued one at a time, 10 ms apart; each job's latency is its handler's
 * start minus the moment just before its enqueue call. Percentiles by nearest rank. Measured twice per system:
 * - latency.*: the app and the worker in one process, as in a Nest app (where nestjs-pg-queue's eager start
 *   applies: the insert claims the job for the idle worker);
 * - latencyRemote.*: then the same jobs from a producer process of their own (an API instance enqueueing for
 *   worker instances): the wake-up and the claim's round trip, for every system. Clocks: epoch ms of one machine.
 */
export async function latencyScenario(ctx: ScenarioContext, system: SystemInfo): Promise<Figures> {
  const { jobs, intervalMs, concurrency } = ctx.profile.latency;
  return withFreshDatabase(ctx.serverUrl, databaseName('lat', system.id, ctx.run), async (url) => {
    const worker = await SystemProcess.start({ system: system.id, url, role: 'worker', concurrency, poolSize: workerPoolSize(concurrency) });
    let producer: SystemProcess | undefined;
    try {
      await sleep(IDLE_MS);
      const samples = await worker.send({ cmd: 'latency', n: jobs, intervalMs, timeoutMs: 60_000 });
      if (samples.length < jobs) ctx.log(`  ${system.id}: only ${samples.length} of ${jobs} latency jobs started within 60 s`);
      producer = await SystemProcess.start({ system: system.id, url, role: 'producer', concurrency, poolSize: 4 });
      await sleep(IDLE_MS);
      await worker.send({ cmd: 'latency-samples', begin: true, n: 0, timeoutMs: 0 });
      await producer.send({ cmd: 'enqueue-stamped', n: jobs, intervalMs });
      const remote = await worker.send({ cmd: 'latency-samples', n: jobs, timeoutMs: 60_000 });
      if (remote.length < jobs) ctx.log(`  ${system.id}: only ${remote.length} of ${jobs} latency jobs from another process started within 60 s`);
      return { ...figures('latency', samples), ...figures('latencyRemote', remote) };
    } finally {
      await producer?.stop();
      await worker.stop();
    }
  });
}

function figures(prefix: string, samples: number[]): Figures {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    [`${prefix}.p50`]: percentile(sorted, 50),
    [`${prefix}.p95`]: percentile(sorted, 95),
    [`${prefix}.p99`]: percentile(sorted, 99),
    [`${prefix}.max`]: sorted[sorted.length - 1] ?? NaN,
  };
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}
