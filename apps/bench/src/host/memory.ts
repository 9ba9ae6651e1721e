import { sleep } from './clock.js';
import type { MemoryStats } from './protocol.js';

/** memoryUsage() after two full GCs, a tick apart (finalizers of the first run before the second). */
export async function memoryAfterGc(): Promise<MemoryStats> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) {
    gc();
    await sleep(50);
    gc();
  }
  const m = process.memoryUsage();
  return { gc: gc !== undefined, rssBytes: m.rss, heapUsedBytes: m.heapUsed, heapTotalBytes: m.heapTotal, externalBytes: m.external, arrayBuffersBytes: m.arrayBuffers };
}
