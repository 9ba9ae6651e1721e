import { workerPoolSize } from '../config.js';
import { checkpoint, deadlockCount, rowWrites, walPositionBytes, withFreshDatabase } from '../db/databases.js';
import { statementFigures } from '../db/statements.js';
import { sleep } from '../host/clock.js';
import { machineBusyMs } from '../host/cpu-meter.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';
import { waitUntilDone } from './wait-until-done.js';

/** Idle workers get this long to finish booting (LISTEN connected, first empty claim done) before jobs arrive. */
export const SETTLE_MS = 1_000;

/**
 * Throughput on a pre-filled queue: the worker starts idle, then N jobs arrive in one bulk call (one
 * statement, one transaction: all of them become visible at once, before any can be claimed). Timed from
 * the first handler start to the moment the database shows every job completed, so neither boot time nor
 * the insert counts. `scenario` 'defaults' is the same measurement for nestjs-pg-queue with a bare
 * handler's settings next to the tuned ones (its own metric ids and sizes).
 */
export async function processScenario(ctx: ScenarioContext, system: SystemInfo, concurrency: number, scenario: 'process' | 'defaults' = 'process'): Promise<Figures> {
  const jobs = ctx.profile[scenario].jobs;
  const name = databaseName(`${scenario === 'process' ? 'proc' : 'dflt'}${concurrency}`, system.id, ctx.run);
  return withFreshDatabase(ctx.serverUrl, name, async (url) => {
    const worker = await SystemProcess.start({ system: system.id, url, role: 'worker', concurrency, poolSize: workerPoolSize(concurrency) });
    let figures: Figures;
    try {
      await sleep(SETTLE_MS);
      await checkpoint(ctx.serverUrl);
      const walBefore = await walPositionBytes(ctx.serverUrl);
      const busyBefore = machineBusyMs();
      const enqueue = worker.send({ cmd: 'enqueue-bulk', n: jobs, batch: jobs });
      const done = await waitUntilDone([worker], url, system.busySql, jobs, 600_000);
      const busyAfter = machineBusyMs();
      const walAfter = await walPositionBytes(ctx.serverUrl);
      await enqueue;
      if (ctx.statements) ctx.keepStatements(system.id, `${scenario} c=${concurrency}`, await statementFigures(ctx.serverUrl, name), jobs);
      figures = {
        [`${scenario}.c${concurrency}`]: (jobs / (done.doneAt - done.firstAt)) * 1000,
        [`${scenario}.c${concurrency}.extraRuns`]: done.handled - jobs,
      };
      // The machine's CPU from the bulk insert to the last completion (the insert is the same for every system).
      if (busyBefore !== undefined && busyAfter !== undefined) figures[`${scenario}.c${concurrency}.cpuUsPerJob`] = ((busyAfter - busyBefore) * 1000) / jobs;
      // WAL from the insert to the last completion, the whole server (nothing else writes meanwhile); right after
      // a checkpoint, so every system pays the full-page images of the pages it touches first.
      figures[`${scenario}.c${concurrency}.walBytesPerJob`] = (walAfter - walBefore) / jobs;
    } finally {
      await worker.stop();
    }
    figures[`${scenario}.c${concurrency}.deadlocks`] = await deadlockCount(ctx.serverUrl, name);
    // Row versions per job (the insert included), once the worker's connections are closed and have reported.
    const writes = await rowWrites(url, system.relations);
    figures[`${scenario}.c${concurrency}.rowVersionsPerJob`] = (writes.inserted + writes.updated + writes.deleted) / jobs;
    figures[`${scenario}.c${concurrency}.hotShare`] = writes.updated > 0 ? (100 * writes.hotUpdated) / writes.updated : 0;
    return figures;
  });
}
