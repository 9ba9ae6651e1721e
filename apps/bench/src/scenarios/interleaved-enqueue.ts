import { createDatabase, dropDatabase } from '@internal/pg-harness';
import { PRODUCER_POOL_SIZE } from '../config.js';
import { checkpoint } from '../db/databases.js';
import { withClient } from '../db/sql.js';
import { sizeLabel } from '../report/format.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemId } from '../adapters/types.js';
import type { SystemInfo } from '../systems.js';
import type { Command } from '../host/protocol.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';

/** Calls per slice of the one-at-a-time phase; jobs per caller per slice of the concurrent phase. */
const SEQUENTIAL_SLICE = 25;
const CONCURRENT_SLICE_PER_CALLER = 5;

/**
 * The enqueue cells again, every system's producer alive at once (each on its own fresh database of the same
 * server) and the work cut into small slices taken in a fresh random order each round: one-at-a-time calls (in a
 * fresh process, then after a warm-up), 16 concurrent callers, bulk calls of each batch size. A commit's latency
 * here is the disk's, and it drifts by tens of percent over seconds (the `enqueue` scenario, one system after
 * another, swings ±25% per cell); slices a few milliseconds long, interleaved, put every system through the same
 * drift, so their ratio holds still.
 * Each figure is the system's jobs over the time its own slices took.
 */
export async function interleavedEnqueueScenario(ctx: ScenarioContext, systems: SystemInfo[]): Promise<Map<SystemId, Figures>> {
  const { sequential, concurrent, callers, bulk, bulkBatches, warmMs } = ctx.profile.enqueue;
  const names = new Map(systems.map((s) => [s.id, databaseName('enqmix', s.id, ctx.run)]));
  const producers = new Map<SystemId, SystemProcess>();
  const urls = new Map<SystemId, string>();
  /** Jobs each producer said it enqueued, warm-up included: checked against its table at the end. */
  const sent = new Map<SystemId, number>(systems.map((s) => [s.id, 0]));
  const send = async (id: SystemId, command: Extract<Command, { cmd: 'enqueue-sequential' | 'enqueue-concurrent' | 'enqueue-bulk' }>) => {
    const result = await producers.get(id)!.send(command);
    sent.set(id, sent.get(id)! + result.n);
    return result;
  };
  try {
    for (const system of systems) {
      const url = await createDatabase(ctx.serverUrl, names.get(system.id)!);
      urls.set(system.id, url);
      producers.set(system.id, await SystemProcess.start({ system: system.id, url, role: 'producer', concurrency: 1, poolSize: PRODUCER_POOL_SIZE }));
    }
    // Warm-up, untimed: every pool connection opened, every statement prepared.
    for (const id of producers.keys()) {
      await send(id, { cmd: 'enqueue-concurrent', n: callers * 4, callers });
      for (const batch of bulkBatches) await send(id, { cmd: 'enqueue-bulk', n: batch, batch });
    }
    await checkpoint(ctx.serverUrl);
    const totals = new Map<SystemId, Map<string, { n: number; ms: number }>>(systems.map((s) => [s.id, new Map()]));
    const phase = async (metric: string, rounds: number, command: Extract<Command, { cmd: 'enqueue-sequential' | 'enqueue-concurrent' | 'enqueue-bulk' }>) => {
      for (let r = 0; r < rounds; r++) {
        for (const id of shuffled([...producers.keys()])) {
          const { n, ms } = await send(id, command);
          const sum = totals.get(id)!.get(metric) ?? { n: 0, ms: 0 };
          totals.get(id)!.set(metric, { n: sum.n + n, ms: sum.ms + ms });
        }
      }
    };
    // One at a time, twice. First the process's first calls, as a producer that has just started makes them: the
    // code on the path still runs unoptimised, and a library's runs longer than the loop's one pool.query. Then,
    // after warmMs of untimed calls each (the same time for every system, not the same count), what a producer
    // that has been up for a while gets: the cell the bar is checked on.
    await phase('mixed.sequential.fresh', Math.ceil(sequential / SEQUENTIAL_SLICE), { cmd: 'enqueue-sequential', n: SEQUENTIAL_SLICE });
    for (const id of producers.keys()) await send(id, { cmd: 'enqueue-sequential', n: Number.MAX_SAFE_INTEGER, forMs: warmMs });
    await phase('mixed.sequential', Math.ceil(sequential / SEQUENTIAL_SLICE), { cmd: 'enqueue-sequential', n: SEQUENTIAL_SLICE });
    await phase('mixed.concurrent', Math.ceil(concurrent / (callers * CONCURRENT_SLICE_PER_CALLER)), { cmd: 'enqueue-concurrent', n: callers * CONCURRENT_SLICE_PER_CALLER, callers });
    for (const batch of bulkBatches) await phase(`mixed.bulk.${sizeLabel(batch)}`, Math.max(1, Math.ceil(bulk / batch)), { cmd: 'enqueue-bulk', n: batch, batch });
    // Every job a producer reported is in its table (for the systems whose table is background_jobs: ours and the loop).
    for (const system of systems) {
      if (system.notifyTriggerTable !== 'background_jobs') continue;
      const stored = await withClient(urls.get(system.id)!, async (c) => Number((await c.query<{ n: string }>('SELECT count(*) AS n FROM background_jobs')).rows[0].n));
      if (stored !== sent.get(system.id)) throw new Error(`${system.id}: ${sent.get(system.id)} jobs enqueued, ${stored} in background_jobs`);
    }
    const out = new Map<SystemId, Figures>();
    for (const [id, metrics] of totals) out.set(id, Object.fromEntries([...metrics].map(([metric, { n, ms }]) => [metric, (n / ms) * 1000])));
    return out;
  } finally {
    for (const producer of producers.values()) await producer.stop().catch(() => undefined);
    for (const name of names.values()) await dropDatabase(ctx.serverUrl, name).catch((error: unknown) => ctx.log(`could not drop ${name}: ${String(error)}`));
  }
}

function shuffled<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}
