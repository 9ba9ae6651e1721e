import type { BenchPayload } from '../adapters/types.js';
import type { HostStats } from './protocol.js';
import { nowMs } from './clock.js';

/**
 * Counts handler starts. Kept to a counter, two timestamps and an optional array so that recording a
 * job costs the same tiny amount in every system's handler and never shows in the figures.
 */
export class Tracker {
  handled = 0;
  private firstAt: number | null = null;
  private readonly marks = new Map<number, number | null>();
  private latencies: number[] | undefined;
  private peakRss = 0;
  private readonly sampler: NodeJS.Timeout;

  constructor(marks: number[] = []) {
    for (const k of marks) this.marks.set(k, null);
    // Peak RSS: sampled, since a single reading at the end misses what a burst allocated.
    this.sampler = setInterval(() => this.sampleRss(), 200);
    this.sampler.unref();
  }

  readonly onJob = (payload: BenchPayload): void => {
    const now = nowMs();
    this.handled++;
    if (this.firstAt === null) this.firstAt = now;
    if (this.marks.has(this.handled)) this.marks.set(this.handled, now);
    if (this.latencies && payload && typeof payload.t === 'number') this.latencies.push(now - payload.t);
  };

  recordLatencies(): number[] {
    this.latencies = [];
    return this.latencies;
  }

  stats(): HostStats {
    const rss = this.sampleRss();
    const { heapUsed, heapTotal } = process.memoryUsage();
    return {
      handled: this.handled,
      firstAt: this.firstAt,
      marks: Object.fromEntries(this.marks),
      rssBytes: rss,
      peakRssBytes: this.peakRss,
      heapUsedBytes: heapUsed,
      heapTotalBytes: heapTotal,
    };
  }

  get peakRssBytes(): number {
    this.sampleRss();
    return this.peakRss;
  }

  close(): void {
    clearInterval(this.sampler);
  }

  private sampleRss(): number {
    const rss = process.memoryUsage.rss();
    if (rss > this.peakRss) this.peakRss = rss;
    return rss;
  }
}
