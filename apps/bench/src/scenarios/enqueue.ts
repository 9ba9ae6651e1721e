import { PRODUCER_POOL_SIZE } from '../config.js';
import { checkpoint, withFreshDatabase } from '../db/databases.js';
import { sampleWaits, setNotifyTriggers } from '../db/wait-events.js';
import { SystemProcess } from '../host/system-process.js';
import { sizeLabel } from '../report/format.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';

/**
 * Enqueue throughput of an enqueue-only instance (no workers running), through each library's public API:
 * one call at a time; 16 concurrent callers on 16 connections, one job per transaction (a web server under
 * load), with pg_stat_activity sampled meanwhile (backends waiting on Lock:object: commits of transactions
 * that sent a NOTIFY queue behind one lock), and for a job table woken by a NOTIFY trigger the same inserts
 * with that trigger disabled (the reference: what the NOTIFY costs); the bulk API with ids returned, in calls
 * of each profile batch size.
 */
export async function enqueueScenario(ctx: ScenarioContext, system: SystemInfo): Promise<Figures> {
  const { sequential, concurrent, callers, bulk, bulkBatches } = ctx.profile.enqueue;
  const name = databaseName('enq', system.id, ctx.run);
  return withFreshDatabase(ctx.serverUrl, name, async (url) => {
    const producer = await SystemProcess.start({ system: system.id, url, role: 'producer', concurrency: 1, poolSize: PRODUCER_POOL_SIZE });
    try {
      // Warm-up, untimed: opens every pool connection and prepares every statement the timed phases use.
      await producer.send({ cmd: 'enqueue-concurrent', n: callers * 4, callers });
      for (const batch of bulkBatches) await producer.send({ cmd: 'enqueue-bulk', n: batch, batch });
      await checkpoint(ctx.serverUrl);
      const figures: Figures = {};
      const one = await producer.send({ cmd: 'enqueue-sequential', n: sequential });
      figures['enqueue.sequential'] = (one.n / one.ms) * 1000;

      const { result: many, waits } = await sampleWaits(ctx.serverUrl, name, producer.send({ cmd: 'enqueue-concurrent', n: concurrent, callers }));
      figures['enqueue.concurrent'] = (many.n / many.ms) * 1000;
      figures['enqueue.concurrent.lockObjectMean'] = waits.lockObjectMean;
      figures['enqueue.concurrent.lockObjectMax'] = waits.lockObjectMax;
      ctx.log(`  ${system.id}: ${callers} concurrent callers, ${waits.samples} samples of pg_stat_activity, active backends waiting on (mean per sample): ${waits.top || 'nothing'}`);

      if (system.notifyTriggerTable) {
        const disabled = await setNotifyTriggers(url, system.notifyTriggerTable, false);
        if (disabled.length === 0) {
          ctx.log(`  ${system.id}: no NOTIFY trigger on ${system.notifyTriggerTable}: no reference row`);
        } else {
          await checkpoint(ctx.serverUrl);
          const { result: quiet, waits: quietWaits } = await sampleWaits(ctx.serverUrl, name, producer.send({ cmd: 'enqueue-concurrent', n: concurrent, callers }));
          await setNotifyTriggers(url, system.notifyTriggerTable, true);
          figures['enqueue.concurrentNoNotify'] = (quiet.n / quiet.ms) * 1000;
          ctx.log(`  ${system.id}: the same with trigger ${disabled.join(', ')} disabled: waiting on ${quietWaits.top || 'nothing'}`);
        }
      }

      for (const batch of bulkBatches) {
        await checkpoint(ctx.serverUrl);
        const run = await producer.send({ cmd: 'enqueue-bulk', n: Math.max(bulk, batch), batch });
        figures[`enqueue.bulk.${sizeLabel(batch)}`] = (run.n / run.ms) * 1000;
      }
      return figures;
    } finally {
      await producer.stop();
    }
  });
}
