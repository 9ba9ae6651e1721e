import { workerPoolSize } from '../config.js';
import { checkpoint, seed, seedFuture, vacuumAnalyze, withFreshDatabase } from '../db/databases.js';
import { nowMs, sleep } from '../host/clock.js';
import { SystemProcess } from '../host/system-process.js';
import { sizeLabel } from '../report/format.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';

/**
 * Claim rate with a deep queue: `size` jobs are already waiting when the worker starts; the rate is taken
 * over the first `claims` handler starts (first to last), so it measures how fast jobs come off a big queue,
 * not how the queue drains. Two shapes: one shared run_at (one big transaction, the case an index without
 * a tie-breaker handles badly) and run_at values spread out (jobs enqueued over time).
 */
export async function backlogScenario(ctx: ScenarioContext, system: SystemInfo, size: number, spread: boolean): Promise<Figures> {
  const { claims, concurrency } = ctx.profile.backlog;
  const shape = spread ? 'spread' : 'shared';
  const name = databaseName(`bl${sizeLabel(size).toLowerCase()}${shape.slice(0, 2)}`, system.id, ctx.run);
  return withFreshDatabase(ctx.serverUrl, name, async (url) => {
    // The library creates its own schema; a producer instance does that and leaves.
    const setup = await SystemProcess.start({ system: system.id, url, role: 'producer', concurrency: 1, poolSize: 2 });
    await setup.stop();
    const seeded = nowMs();
    await seed(url, system.seedSql, size, spread);
    // Scheduled jobs ahead of the due ones (--future): a claim that reads them grows with their number.
    if (ctx.futureJobs > 0) await seedFuture(url, system.seedFutureSql, ctx.futureJobs);
    await vacuumAnalyze(url, system.relations);
    await checkpoint(ctx.serverUrl);
    const future = ctx.futureJobs > 0 ? ` + ${sizeLabel(ctx.futureJobs)} for tomorrow` : '';
    ctx.log(`  ${system.id}: seeded ${sizeLabel(size)} (${shape})${future} in ${((nowMs() - seeded) / 1000).toFixed(1)} s`);
    const worker = await SystemProcess.start({
      system: system.id,
      url,
      role: 'worker',
      concurrency,
      poolSize: workerPoolSize(concurrency),
      marks: [claims],
    });
    try {
      const deadline = nowMs() + 600_000;
      for (;;) {
        const stats = await worker.stats();
        const at = stats.marks[claims];
        if (at !== null && at !== undefined && stats.firstAt !== null) {
          return { [`backlog.${sizeLabel(size)}.${shape}`]: ((claims - 1) / (at - stats.firstAt)) * 1000 };
        }
        if (nowMs() > deadline) throw new Error(`${system.id}: ${stats.handled} of ${claims} claims after 600 s`);
        await sleep(25);
      }
    } finally {
      await worker.stop();
    }
  });
}

