import type { HandlerMode, SystemId } from '../adapters/types.js';
import { workerPoolSize } from '../config.js';
import { checkpoint, withFreshDatabase } from '../db/databases.js';
import { statementFigures } from '../db/statements.js';
import { sleep } from '../host/clock.js';
import { machineBusyMs } from '../host/cpu-meter.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';
import { SETTLE_MS } from './process.js';
import { waitUntilDone } from './wait-until-done.js';

/** One cell of the modes scenario: a handler shape at a concurrency, for the systems that have it. */
export interface ModesVariant {
  metric: string;
  concurrency: number;
  mode: HandlerMode;
  systems: SystemId[];
}

/**
 * How the handler takes its jobs, measured as the process scenario measures throughput (a pre-filled queue, timed
 * from the first handler start to the last completion in the table):
 * - batch100: a batch handler of 100 jobs per call, one call at a time, against pg-boss's batch work (one loop of
 *   batchSize 100) and against the same jobs one per call with 100 in flight (single.c100);
 * - steps0/1/5 at c10: each job records that many durable steps (job.step with a no-op function), so the cost of a
 *   step is the difference, in jobs/s and in machine CPU per job;
 * - tx at c10: a transactional handler (the completion written in a transaction of the app's DataSource), against
 *   steps0.c10, the same no-op handler settled by the batched outcome writer.
 */
export function modesVariants(): ModesVariant[] {
  const ours: SystemId[] = ['pg-queue'];
  return [
    { metric: 'modes.single.c100', concurrency: 100, mode: {}, systems: ours },
    { metric: 'modes.batch100', concurrency: 1, mode: { batch: 100 }, systems: ['pg-queue', 'pg-boss'] },
    { metric: 'modes.steps0.c10', concurrency: 10, mode: { steps: 0 }, systems: ours },
    { metric: 'modes.steps1.c10', concurrency: 10, mode: { steps: 1 }, systems: ours },
    { metric: 'modes.steps5.c10', concurrency: 10, mode: { steps: 5 }, systems: ours },
    { metric: 'modes.tx.c10', concurrency: 10, mode: { transactional: true }, systems: ours },
  ];
}

export async function modesScenario(ctx: ScenarioContext, system: SystemInfo, variant: ModesVariant): Promise<Figures> {
  const jobs = ctx.profile.process.jobs;
  const { metric, concurrency, mode } = variant;
  const name = databaseName(metric.replace(/\W/g, ''), system.id, ctx.run);
  return withFreshDatabase(ctx.serverUrl, name, async (url) => {
    const worker = await SystemProcess.start({ system: system.id, url, role: 'worker', concurrency, poolSize: workerPoolSize(concurrency), mode });
    try {
      await sleep(SETTLE_MS);
      await checkpoint(ctx.serverUrl);
      const busyBefore = machineBusyMs();
      const enqueue = worker.send({ cmd: 'enqueue-bulk', n: jobs, batch: jobs });
      const done = await waitUntilDone([worker], url, system.busySql, jobs, 600_000);
      const busyAfter = machineBusyMs();
      await enqueue;
      if (ctx.statements) ctx.keepStatements(system.id, metric, await statementFigures(ctx.serverUrl, name), jobs);
      const figures: Figures = {
        [metric]: (jobs / (done.doneAt - done.firstAt)) * 1000,
        [`${metric}.extraRuns`]: done.handled - jobs,
      };
      if (busyBefore !== undefined && busyAfter !== undefined) figures[`${metric}.cpuUsPerJob`] = ((busyAfter - busyBefore) * 1000) / jobs;
      return figures;
    } finally {
      await worker.stop();
    }
  });
}
