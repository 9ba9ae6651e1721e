import { workerPoolSize } from '../config.js';
import { checkpoint, deadlockCount, withFreshDatabase } from '../db/databases.js';
import { sleep } from '../host/clock.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';
import { SETTLE_MS } from './process.js';
import { waitUntilDone } from './wait-until-done.js';

/** Metric id prefix of one job duration: `spread.50ms`, `spread.2000ms`. */
export function spreadMetric(jobMs: number): string {
  return `spread.${jobMs}ms`;
}

/**
 * Jobs that take time, worked by several processes: `processes` workers at `concurrency` each, all booted
 * and idle before the jobs arrive in one bulk call; timed from the first handler start in any process to
 * all done. Besides throughput it reports the share of the jobs the least and the most busy process ran
 * (100 / processes each when the work is spread evenly): a worker that claims far ahead of its free slots
 * takes jobs the other processes could have started, and with long jobs that shows here, not in the
 * no-op figures.
 */
export async function spreadScenario(ctx: ScenarioContext, system: SystemInfo, jobMs: number, jobs: number): Promise<Figures> {
  const { processes, concurrency } = ctx.profile.spread;
  const metric = spreadMetric(jobMs);
  const name = databaseName(`spread${jobMs}`, system.id, ctx.run);
  return withFreshDatabase(ctx.serverUrl, name, async (url) => {
    const start = () => SystemProcess.start({ system: system.id, url, role: 'worker', concurrency, poolSize: workerPoolSize(concurrency), jobMs });
    const first = await start(); // creates the schema alone
    const workers = [first];
    let figures: Figures;
    try {
      const rest = await Promise.allSettled(Array.from({ length: processes - 1 }, start));
      for (const r of rest) if (r.status === 'fulfilled') workers.push(r.value);
      const failed = rest.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
      await sleep(SETTLE_MS);
      await checkpoint(ctx.serverUrl);
      const enqueue = first.send({ cmd: 'enqueue-bulk', n: jobs, batch: jobs });
      const done = await waitUntilDone(workers, url, system.busySql, jobs, 900_000);
      await enqueue;
      const shares = done.perProcess.map((n) => (n / Math.max(1, done.handled)) * 100);
      ctx.log(`  ${system.id}: ${jobMs} ms jobs, share of each process: ${shares.map((s) => `${s.toFixed(1)}%`).join(' ')}`);
      figures = {
        [metric]: (jobs / (done.doneAt - done.firstAt)) * 1000,
        [`${metric}.minShare`]: Math.min(...shares),
        [`${metric}.maxShare`]: Math.max(...shares),
        [`${metric}.extraRuns`]: done.handled - jobs,
      };
    } finally {
      await Promise.all(workers.map((w) => w.stop(Math.max(30_000, jobMs * 3))));
    }
    figures[`${metric}.deadlocks`] = await deadlockCount(ctx.serverUrl, name);
    return figures;
  });
}
