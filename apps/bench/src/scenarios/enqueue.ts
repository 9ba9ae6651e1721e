import { PRODUCER_POOL_SIZE } from '../config.js';
import { checkpoint, withFreshDatabase } from '../db/databases.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';

/**
 * Enqueue throughput of an enqueue-only instance (no workers running), through each library's public API:
 * one call at a time; 16 concurrent callers (a web server under load); the bulk API in calls of 1,000 jobs.
 */
export async function enqueueScenario(ctx: ScenarioContext, system: SystemInfo): Promise<Figures> {
  const { sequential, concurrent, callers, bulk, bulkBatch } = ctx.profile.enqueue;
  return withFreshDatabase(ctx.serverUrl, databaseName('enq', system.id, ctx.run), async (url) => {
    const producer = await SystemProcess.start({ system: system.id, url, role: 'producer', concurrency: 1, poolSize: PRODUCER_POOL_SIZE });
    try {
      // Warm-up, untimed: opens every pool connection and prepares every statement the timed phases use.
      await producer.send({ cmd: 'enqueue-concurrent', n: callers * 4, callers });
      await producer.send({ cmd: 'enqueue-bulk', n: bulkBatch, batch: bulkBatch });
      await checkpoint(ctx.serverUrl);
      const one = await producer.send({ cmd: 'enqueue-sequential', n: sequential });
      const many = await producer.send({ cmd: 'enqueue-concurrent', n: concurrent, callers });
      const bulkRun = await producer.send({ cmd: 'enqueue-bulk', n: bulk, batch: bulkBatch });
      return {
        'enqueue.sequential': (one.n / one.ms) * 1000,
        'enqueue.concurrent': (many.n / many.ms) * 1000,
        'enqueue.bulk': (bulkRun.n / bulkRun.ms) * 1000,
      };
    } finally {
      await producer.stop();
    }
  });
}
