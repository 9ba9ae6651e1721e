import { AUTO_MAX_IN_HAND } from '../pg-queue.constants.js';

/**
 * The read-ahead covers what the slots finish during this many claim round trips. The buffer is topped up
 * when half of it has gone (Slots.claimWant in start-plan.ts), so the half left must keep the slots busy for the one
 * round trip the top-up takes.
 */
const HORIZON_ROUND_TRIPS = 2;

/**
 * Moving averages: a slower sample moves the estimate fast (fewer jobs read ahead at once: a burst of slow jobs
 * must not be claimed in bulk), a faster one slowly (the read-ahead grows back over a few dozen jobs).
 */
const SLOWER_WEIGHT = 0.5;
const FASTER_WEIGHT = 0.1;

/**
 * Jobs in the buffer are given back when they hold more work than this (by the current estimate) and more than
 * HOLD_ROUND_TRIPS claim round trips of it: another process could start them sooner than this one.
 */
export const MAX_HOLD_MS = 1_000;
const HOLD_ROUND_TRIPS = 4;

/**
 * The adaptive read-ahead of `prefetch: 'auto'`: how many jobs to claim beyond the free slots, sized by
 * Little's law from two moving estimates, the handler's duration and the claim's round trip. The buffer only
 * has to hide the claim's latency: the slots finish `concurrency * roundTripMs / jobMs` jobs while a claim is
 * on its way, and holding more only keeps jobs (and their leases) from other processes. So no-op jobs read
 * hundreds ahead (one claim per few hundred jobs, like the tuned settings), and jobs of 50 ms or more read
 * ahead none or one (as with prefetch 0, the work spreads evenly over processes).
 *
 * Nothing is read ahead until a job has finished (no duration known yet), and from there the read-ahead at
 * most doubles per claim: a queue whose first jobs are fast and the rest slow is not claimed in bulk on the
 * strength of one sample. It shrinks at once. The cost per job is one moving-average update (jobFinished);
 * claimWant reads `size` with a division, and nothing allocates.
 *
 * River's fetch (free slots only) and graphile-worker's localQueue (a fixed size, jobs returned after a TTL)
 * are its two ends, picked per queue from measurements; why, and the figures: docs/performance.md, "Defaults".
 */
export class ReadAhead {
  /** Moving average of the handler's duration, ms; NaN until a job has finished. */
  private jobMs = NaN;
  /** Moving average of the claim's round trip, ms; NaN until a claim has returned. */
  private roundTripMs = NaN;
  /** The largest read-ahead allowed now: twice the last one claimed with (at least `concurrency`). */
  private ceiling: number;
  /** The most read-ahead allowed, ever. */
  readonly max: number;

  constructor(private readonly concurrency: number) {
    this.max = Math.max(0, AUTO_MAX_IN_HAND - concurrency);
    this.ceiling = Math.min(this.max, concurrency);
  }

  /** A handler returned (or threw) after `ms`. */
  jobFinished(ms: number): void {
    this.jobMs = movingAverage(this.jobMs, ms);
  }

  /** A claim came back after `ms`, sized with the read-ahead `size` had then. */
  claimed(ms: number, readAhead: number): void {
    this.roundTripMs = movingAverage(this.roundTripMs, ms);
    this.ceiling = Math.min(this.max, Math.max(this.concurrency, 2 * readAhead));
  }

  /** Jobs to hold beyond the running ones now. */
  get size(): number {
    return Math.min(this.ceiling, this.sizeFor(this.jobMs));
  }

  /**
   * No slot has freed for `ms` while all were busy (and jobs waited, in the buffer or armed): every running job has taken
   * at least that long, so it counts as a sample when it is above the estimate. Without it, jobs that turned
   * slow (or stuck) would hold the buffer until the first of them finished, and a buffer given back on the
   * strength of the stall would be claimed again at once.
   */
  stalled(ms: number): void {
    if (!(this.jobMs >= ms)) this.jobFinished(ms); // NaN >= ms is false: the stall is the first sample
  }

  /**
   * Buffered jobs to give back now: those beyond the read-ahead, once the buffer holds more work than it should
   * (more than MAX_HOLD_MS and more than HOLD_ROUND_TRIPS round trips of it, by the current estimates).
   */
  surplus(buffered: number): number {
    const jobMs = this.jobMs;
    if (buffered === 0 || !(jobMs > 0)) return 0;
    const holdMs = (buffered * jobMs) / this.concurrency;
    if (holdMs <= MAX_HOLD_MS || holdMs <= HOLD_ROUND_TRIPS * this.roundTripMs) return 0;
    return Math.max(0, buffered - this.size);
  }

  /** The read-ahead for jobs of `jobMs`: 0 until both estimates exist. */
  private sizeFor(jobMs: number): number {
    const ahead = Math.floor((this.concurrency * HORIZON_ROUND_TRIPS * this.roundTripMs) / Math.max(jobMs, 0.001));
    return ahead >= 0 ? Math.min(this.max, ahead) : 0; // NaN (an estimate missing) >= 0 is false
  }
}

/** The estimate after one more sample: the first sample as it is (NaN: none yet), then the weights above (StartAhead's too). */
export function movingAverage(current: number, sample: number): number {
  if (current !== current) return sample;
  return current + (sample - current) * (sample > current ? SLOWER_WEIGHT : FASTER_WEIGHT);
}
