import { workerPoolSize } from '../config.js';
import { checkpoint, deadlockCount, withFreshDatabase } from '../db/databases.js';
import { relationSizes } from '../db/sizes.js';
import { setStatementTracking, statementDelta, statementFigures } from '../db/statements.js';
import { sleep } from '../host/clock.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';
import { waitUntilDone } from './wait-until-done.js';

const MB = 1024 * 1024;

/**
 * Many jobs through one worker process that also enqueues them (bulk calls, keeping one to two waves
 * queued), then the costs of running: job-table and index size at the end versus right after the schema
 * was created (each system with its default retention: graphile-worker deletes finished jobs, pg-boss and
 * nestjs-pg-queue keep them for days, BullMQ until they are removed, so the row count is reported too),
 * the worker's RSS, and the statements it sends per second once idle (pg_stat_statements: the polling and
 * maintenance cost of an idle worker).
 */
export async function steadyStateScenario(ctx: ScenarioContext, system: SystemInfo): Promise<Figures> {
  const { jobs, wave, chunk, concurrency, idleWindowMs } = ctx.profile.steady;
  const name = databaseName('steady', system.id, ctx.run);
  return withFreshDatabase(ctx.serverUrl, name, async (url) => {
    const worker = await SystemProcess.start({ system: system.id, url, role: 'worker', concurrency, poolSize: workerPoolSize(concurrency) });
    let figures: Figures;
    try {
      await sleep(1_000);
      const booted = await worker.stats();
      const start = await relationSizes(url, system.relations);
      await checkpoint(ctx.serverUrl);
      const feed = await worker.send({ cmd: 'feed', total: jobs, wave, chunk, timeoutMs: 3_600_000 });
      await waitUntilDone([worker], url, system.busySql, jobs, 600_000);
      const end = await relationSizes(url, system.relations);
      // Idle: let in-flight outcome writes and any post-burst work finish, then count what the worker sends.
      await sleep(2_000);
      if (!ctx.statements) await setStatementTracking(ctx.serverUrl, true);
      const before = await statementFigures(ctx.serverUrl, name);
      await sleep(idleWindowMs);
      const after = await statementFigures(ctx.serverUrl, name);
      if (!ctx.statements) await setStatementTracking(ctx.serverUrl, false);
      const idle = statementDelta(before, after);
      ctx.keepStatements(system.id, 'idle', idle, 0);
      const idleStats = await worker.stats();
      figures = {
        'steady.throughput': (feed.n / feed.ms) * 1000,
        'steady.tableStartMB': start.tableBytes / MB,
        'steady.tableEndMB': end.tableBytes / MB,
        'steady.indexStartMB': start.indexBytes / MB,
        'steady.indexEndMB': end.indexBytes / MB,
        'steady.rowsEnd': end.rows,
        // The whole life of the worker: the heap can keep growing after the burst, until a major GC.
        'steady.peakRssMB': Math.max(feed.peakRssBytes, idleStats.peakRssBytes) / MB,
        'steady.idleRssMB': idleStats.rssBytes / MB,
        // What the RSS is made of: the process before any job, and V8's heap once idle (in use, and reserved).
        'steady.bootRssMB': booted.rssBytes / MB,
        'steady.idleHeapUsedMB': idleStats.heapUsedBytes / MB,
        'steady.idleHeapTotalMB': idleStats.heapTotalBytes / MB,
        'steady.idleStatementsPerSec': idle.reduce((sum, s) => sum + s.calls, 0) / (idleWindowMs / 1000),
      };
    } finally {
      await worker.stop();
    }
    figures['steady.deadlocks'] = await deadlockCount(ctx.serverUrl, name);
    return figures;
  });
}
