import type { BenchLimits } from '../adapters/types.js';
import { workerPoolSize } from '../config.js';
import { checkpoint, deadlockCount, withFreshDatabase } from '../db/databases.js';
import { statementFigures } from '../db/statements.js';
import { sleep } from '../host/clock.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';
import { SETTLE_MS } from './process.js';
import { waitUntilDone } from './wait-until-done.js';

/** One variant of the limits scenario: its metric id and the limits its workers run with ({}: none, same sizing). */
export interface LimitsVariant {
  metric: string;
  limits: BenchLimits;
}

/** The variants, in order: the reference without limits first, so each limit's cost reads against it. */
export function limitsVariants(profile: ScenarioContext['profile']): LimitsVariant[] {
  const { global, keys } = profile.limits;
  return [
    { metric: 'limits.none', limits: {} },
    ...global.map((n) => ({ metric: `limits.global${n}`, limits: { globalConcurrency: n } })),
    { metric: `limits.perKey1x${keys}`, limits: { concurrencyPerKey: 1, keys } },
  ];
}

/**
 * Whether a system has the limits a variant asks for (SystemInfo.limits). The reference without limits runs
 * for every system that has at least one, so that each limit's cost reads against the same system unlimited.
 */
export function limitsSupported(system: SystemInfo, variant: LimitsVariant): boolean {
  const has = system.limits ?? [];
  if (variant.limits.globalConcurrency !== undefined && !has.includes('global')) return false;
  if (variant.limits.concurrencyPerKey !== undefined && !has.includes('perKey')) return false;
  return has.length > 0;
}

/**
 * Limits across instances: a pre-filled queue worked by `processes` workers at `concurrency` without
 * prefetch, with no limit (the reference), a global limit that never binds (the cost of the limited claim
 * alone: its lock, its count), one that binds, and a limit of one running job per key over many keys (jobs
 * spread evenly). Timed like the process scenario. nestjs-pg-queue has both kinds, BullMQ the global one
 * (its per-group limits are BullMQ Pro's); a system without the variant's limit is skipped (no figures).
 */
export async function limitsScenario(ctx: ScenarioContext, system: SystemInfo, variant: LimitsVariant): Promise<Figures> {
  if (!limitsSupported(system, variant)) return {};
  const { jobs, processes, concurrency } = ctx.profile.limits;
  const name = databaseName(variant.metric.replace(/\W/g, '').toLowerCase(), system.id, ctx.run);
  return withFreshDatabase(ctx.serverUrl, name, async (url) => {
    const start = () =>
      SystemProcess.start({ system: system.id, url, role: 'worker', concurrency, poolSize: workerPoolSize(concurrency), limits: variant.limits });
    const first = await start(); // creates the schema alone
    const workers = [first];
    let figures: Figures;
    try {
      for (let i = 1; i < processes; i++) workers.push(await start());
      await sleep(SETTLE_MS);
      await checkpoint(ctx.serverUrl);
      const enqueue = first.send({ cmd: 'enqueue-bulk', n: jobs, batch: jobs });
      const done = await waitUntilDone(workers, url, system.busySql, jobs, 600_000);
      await enqueue;
      if (ctx.statements) ctx.keepStatements(system.id, variant.metric, await statementFigures(ctx.serverUrl, name), jobs);
      figures = {
        [variant.metric]: (jobs / (done.doneAt - done.firstAt)) * 1000,
        [`${variant.metric}.extraRuns`]: done.handled - jobs,
      };
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
    figures[`${variant.metric}.deadlocks`] = await deadlockCount(ctx.serverUrl, name);
    return figures;
  });
}
