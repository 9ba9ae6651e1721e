import type { DepthSnapshot, DepthSource } from '../store/metrics.store.js';
import { DEPTH_SAMPLE_PAGES } from './resolve-metrics-options.js';

export interface DepthReaderOptions {
  cacheMs: number;
  exactLimit: number;
  timeoutMs: number;
  /** Called once per query that answered, with its duration, and once per query that failed. */
  queried?: (ms: number) => void;
  failed?: (error: unknown) => void;
}

/**
 * The depth snapshot scrapes read: one query at a time whatever the number of scrapes (Prometheus replicas, the
 * two depth gauges of one scrape), its answer reused for `cacheMs`. A failed query is not cached: the next
 * scrape asks again.
 */
export class DepthReader {
  private inFlight: Promise<DepthSnapshot> | undefined;
  private last: { at: number; snapshot: DepthSnapshot } | undefined;

  constructor(
    private readonly store: DepthSource,
    private readonly options: DepthReaderOptions,
  ) {}

  read(): Promise<DepthSnapshot> {
    if (this.last && performance.now() - this.last.at < this.options.cacheMs) return Promise.resolve(this.last.snapshot);
    return (this.inFlight ??= this.query());
  }

  private async query(): Promise<DepthSnapshot> {
    const started = performance.now();
    try {
      const snapshot = await this.store.depthSnapshot(this.options.exactLimit, DEPTH_SAMPLE_PAGES, this.options.timeoutMs);
      this.last = { at: performance.now(), snapshot };
      this.options.queried?.(this.last.at - started);
      return snapshot;
    } catch (error) {
      this.options.failed?.(error);
      throw error;
    } finally {
      this.inFlight = undefined;
    }
  }
}
