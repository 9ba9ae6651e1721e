import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { workerPoolSize } from '../config.js';
import { withFreshDatabase } from '../db/databases.js';
import { sleep } from '../host/clock.js';
import { MEMORY_STEPS, type MemoryPart, type MemoryStats } from '../host/protocol.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';
import { waitUntilDone } from './wait-until-done.js';

const MB = 1024 * 1024;
const PARTS = fileURLToPath(new URL('../host/memory-parts.js', import.meta.url));

/**
 * Memory of one worker process (issue 21, item 4): RSS and V8 heap after boot, before any job, and after `jobs`
 * no-op jobs through (the process enqueues them in bulk while it works, as in the steady state), each read after two
 * full GCs (the child runs with --expose-gc), so the heap figure is what the process keeps, not garbage a collection
 * has not reached yet; the RSS peak is sampled through the run. For nestjs-pg-queue a second child also splits the
 * boot heap into Node, each library loaded, Nest, a TypeORM DataSource and the queue's own (host/memory-parts.ts).
 */
export async function memoryScenario(ctx: ScenarioContext, system: SystemInfo): Promise<Figures> {
  const { jobs, concurrency } = ctx.profile.memory;
  const name = databaseName('memory', system.id, ctx.run);
  return withFreshDatabase(ctx.serverUrl, name, async (url) => {
    const worker = await SystemProcess.start({ system: system.id, url, role: 'worker', concurrency, poolSize: workerPoolSize(concurrency), execArgv: ['--expose-gc'] });
    const figures: Figures = {};
    try {
      await sleep(1_000);
      const booted = await worker.send({ cmd: 'memory' });
      const feed = await worker.send({ cmd: 'feed', total: jobs, wave: 10_000, chunk: 1_000, timeoutMs: 3_600_000 });
      await waitUntilDone([worker], url, system.busySql, jobs, 600_000);
      await sleep(2_000);
      const after = await worker.send({ cmd: 'memory' });
      if (!booted.gc || !after.gc) throw new Error(`${system.id}: the worker ran without --expose-gc`);
      Object.assign(figures, memoryFigures('memory.boot', booted), memoryFigures('memory.after', after), {
        'memory.peakRssMB': Math.max(feed.peakRssBytes, (await worker.stats()).peakRssBytes) / MB,
        'memory.heapGrowthMB': (after.heapUsedBytes - booted.heapUsedBytes) / MB,
      });
    } finally {
      await worker.stop();
    }
    if (system.id === 'pg-queue') Object.assign(figures, await queueParts(url, concurrency));
    return figures;
  });
}

function memoryFigures(prefix: string, m: MemoryStats): Figures {
  return { [`${prefix}.rssMB`]: m.rssBytes / MB, [`${prefix}.heapMB`]: m.heapUsedBytes / MB, [`${prefix}.externalMB`]: m.externalBytes / MB };
}

/** The parts of nestjs-pg-queue's worker at boot: each step's heap growth over the one before (host/memory-parts.ts). */
async function queueParts(url: string, concurrency: number): Promise<Figures> {
  const child = fork(PARTS, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: ['--expose-gc'] });
  const answer = await new Promise<{ ok: boolean; parts?: MemoryPart[]; error?: string }>((resolve, reject) => {
    child.once('message', (message) => resolve(message as { ok: boolean; parts?: MemoryPart[]; error?: string }));
    child.once('exit', (code) => reject(new Error(`memory-parts exited with ${code} before it answered`)));
    child.send({ url, concurrency });
  });
  if (!answer.ok || !answer.parts) throw new Error(`memory-parts: ${answer.error}`);
  // Heap only: RSS in one process does not shrink back step by step (freed pages stay mapped), so its steps say little.
  const heap = answer.parts.map((p) => p.after.heapUsedBytes / MB);
  return Object.fromEntries(MEMORY_STEPS.map((_, i) => [`memory.parts.${i}`, i === 0 ? heap[0] : heap[i] - heap[i - 1]]));
}
