import { workerPoolSize } from '../config.js';
import { checkpoint, deadlockCount, withFreshDatabase } from '../db/databases.js';
import { sleep } from '../host/clock.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';
import { SETTLE_MS } from './process.js';
import { waitUntilDone } from './wait-until-done.js';

/**
 * The same pre-filled queue worked by 1, 2 or 4 worker processes (each at the scenario's concurrency).
 * All of them are booted and idle before the jobs arrive in one bulk call, so a slow boot does not hand
 * the first process a head start; timed from the first handler start in any process to all done.
 */
export async function scaleOutScenario(ctx: ScenarioContext, system: SystemInfo, processes: number): Promise<Figures> {
  const { jobs, concurrency } = ctx.profile.scaleOut;
  const name = databaseName(`scale${processes}`, system.id, ctx.run);
  return withFreshDatabase(ctx.serverUrl, name, async (url) => {
    // The first one alone creates the schema (libraries that migrate at start guard it with locks, but
    // there is no reason to make them prove it here).
    const first = await SystemProcess.start({ system: system.id, url, role: 'worker', concurrency, poolSize: workerPoolSize(concurrency) });
    const workers = [first];
    let figures: Figures;
    try {
      const rest = await Promise.allSettled(
        Array.from({ length: processes - 1 }, () =>
          SystemProcess.start({ system: system.id, url, role: 'worker', concurrency, poolSize: workerPoolSize(concurrency) }),
        ),
      );
      for (const r of rest) if (r.status === 'fulfilled') workers.push(r.value);
      const failed = rest.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
      await sleep(SETTLE_MS);
      await checkpoint(ctx.serverUrl);
      const enqueue = first.send({ cmd: 'enqueue-bulk', n: jobs, batch: jobs });
      const done = await waitUntilDone(workers, url, system.busySql, jobs, 600_000);
      await enqueue;
      figures = {
        [`scaleout.p${processes}`]: (jobs / (done.doneAt - done.firstAt)) * 1000,
        [`scaleout.p${processes}.extraRuns`]: done.handled - jobs,
      };
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
    figures[`scaleout.p${processes}.deadlocks`] = await deadlockCount(ctx.serverUrl, name);
    return figures;
  });
}
