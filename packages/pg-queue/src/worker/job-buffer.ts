import type { HeldJob } from './held-job.js';
import { ReadAhead } from './read-ahead.js';

/**
 * How long a buffered job's lease runs (set by the claim, never renewed), at most: if its holder dies, the
 * sweeper puts it back this soon after the claim, uncharged. Also the longest a job waits in a buffer.
 */
export const BUFFER_LEASE_MS = 5_000;
/**
 * The buffer's lease for a module's leaseMs (a short leaseMs shortens it), and its start margin: a buffered job
 * starts only in the first half of its lease (counted from when the claim was sent). The other half is the
 * time its start mark has to reach the row (QueueWorker.pump: behind the mark in flight, on a loaded database)
 * while the short lease still holds; a mark that arrives after the sweeper took the row back is refused, and the
 * job never starts. A quarter was found too little on a 2-core machine running PostgreSQL, four workers and the
 * tests at a load of 10 (when a heartbeat tick marked the start).
 */
export function bufferLease(leaseMs: number): { leaseMs: number; marginMs: number } {
  const lease = Math.min(BUFFER_LEASE_MS, leaseMs);
  return { leaseMs: lease, marginMs: Math.floor(lease / 2) };
}

/**
 * The jobs one queue's worker holds but has not started, in claim order (the claim's priority order), and
 * how many it should hold: a fixed `prefetch`, or `'auto'`'s estimate (ReadAhead). Its policy is local: which
 * job starts next, which may no longer start (past its start deadline: `startBy`), which to give back.
 * Every job in it is in state `buffered`; the worker moves it on.
 */
export class JobBuffer {
  private readonly jobs = new Map<string, HeldJob>();
  /** `prefetch: 'auto'`: sizes the read-ahead from measured durations; undefined for a fixed prefetch. */
  readonly auto: ReadAhead | undefined;
  /** Fixed prefetch: no refill until a slot frees after a give-back for age (a hung handler keeps its slot). */
  private refillHeld = false;
  /** The queue has limits across instances now (set at runtime): nothing is read ahead, whatever the prefetch. */
  off = false;

  constructor(
    concurrency: number,
    prefetch: number | 'auto',
    private readonly fixed = prefetch === 'auto' ? 0 : prefetch,
  ) {
    this.auto = prefetch === 'auto' ? new ReadAhead(concurrency) : undefined;
  }

  get size(): number {
    return this.jobs.size;
  }

  /** How many jobs to hold beyond the running ones now. */
  get readAhead(): number {
    if (this.refillHeld || this.off) return 0;
    return this.auto ? this.auto.size : this.fixed;
  }

  add(job: HeldJob): void {
    this.jobs.set(job.id, job);
  }

  /** Takes `job` out (it started, was given back, lost or cancelled); false if it was not here. */
  remove(job: HeldJob): boolean {
    if (this.jobs.get(job.id) !== job) return false;
    this.jobs.delete(job.id);
    return true;
  }

  /**
   * The next job that may start at `now`, taken out; undefined when none may. Jobs past their start deadline
   * on the way are taken out into `expired`, for the caller to give back. With `may`, the next job is taken only if
   * `may(job)` (left in otherwise, and undefined returned): the jobs behind it never pass it.
   */
  next(now: number, expired: HeldJob[], may?: (job: HeldJob) => boolean): HeldJob | undefined {
    for (const job of this.jobs.values()) {
      if (now < job.startBy) {
        if (may && !may(job)) return undefined;
        this.jobs.delete(job.id);
        return job;
      }
      this.jobs.delete(job.id);
      expired.push(job);
    }
    return undefined;
  }

  /** Every job in it, in claim order, taken out. */
  takeAll(): HeldJob[] {
    const all = [...this.jobs.values()];
    this.jobs.clear();
    return all;
  }

  /** Jobs in it, in claim order (left in). */
  values(): IterableIterator<HeldJob> {
    return this.jobs.values();
  }

  /**
   * The periodic review: takes out what should go back to the queue now: jobs past their start deadline, and
   * with `'auto'`, the surplus its estimate no longer wants (the last claimed first). `stalledMs`: how long no
   * slot has freed while all were busy (0: a slot is free), a sample for the estimate.
   */
  review(now: number, stalledMs: number): HeldJob[] {
    const out: HeldJob[] = [];
    for (const job of this.jobs.values()) if (now >= job.startBy) out.push(job);
    for (const job of out) this.jobs.delete(job.id);
    if (this.auto && this.jobs.size > 0) {
      if (stalledMs > 0) this.auto.stalled(stalledMs);
      const surplus = this.takeSurplus();
      if (surplus) out.push(...surplus);
    }
    // A fixed buffer that aged out behind busy slots would be claimed full again at once and age out again.
    if (!this.auto && out.length > 0 && stalledMs > 0) this.refillHeld = true;
    return out;
  }

  /**
   * With `'auto'`: takes out the jobs its estimate no longer wants (the last claimed first); undefined when there
   * are none. Checked after every job that ends, so it costs a few comparisons when there is no surplus: it does
   * not look for jobs past their start deadline (pump() and the periodic review do). Before, the whole review ran
   * there: a walk of the buffer, up to AUTO_MAX_IN_HAND jobs, after every job that ended.
   */
  takeSurplus(): HeldJob[] | undefined {
    const surplus = this.auto && this.jobs.size > 0 ? this.auto.surplus(this.jobs.size) : 0;
    if (surplus <= 0) return undefined;
    const last = [...this.jobs.values()].slice(-surplus);
    for (const job of last) this.jobs.delete(job.id);
    return last;
  }

  /** A slot freed: a fixed buffer may refill again. */
  slotFreed(): void {
    this.refillHeld = false;
  }
}
