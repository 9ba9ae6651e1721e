import { movingAverage } from './read-ahead.js';

/**
 * How many jobs a worker holds started ahead of a free slot (state `armed`): the jobs its slots finish while one
 * start mark is on its way, by Little's law, `concurrency * markMs / jobMs`, rounded. The claim marks them started
 * itself when the buffer is empty (QueueWorker.reserveSlots: no statement more), and the start mark does for jobs
 * taken from the buffer (QueueWorker.startFromBuffer).
 *
 * Why: a job from the read-ahead buffer starts only once its row says so (issue 39). Marked one by one as slots
 * freed, no-op jobs ran at a quarter of the rate they had without marks (docs/performance.md, "Start marks"): a
 * mark carried at most `concurrency` jobs, the slots stood idle for each, and the statements per job tripled the CPU
 * per job. Held started ahead, a freed slot starts the next job at once, and one statement covers many starts.
 *
 * What it costs: an armed job's row says started (charged, the full lease, `buffered = false`) a little before its
 * handler is called: at most about one round trip's worth of jobs, by construction. So a statement that acts only on
 * jobs not started (bulk cancel of queued jobs, `onConflict: 'replace'`, a failing flow's cancel) leaves it to its
 * worker, as it does a running job, and a process that dies holding it leaves it charged, as it does a job its claim
 * started. Jobs much longer than a round trip are never armed (a 50 ms job with a 0.5 ms mark rounds to 0), jobs
 * on their last attempt never (a death then would dead-letter a job that never ran), and a stall (no slot freed
 * while all were busy) stops arming more; armed jobs are given back only when late (QueueWorker.reviewBuffer): they
 * are the next in claim order, and giving back some while the buffer behind them stays would start jobs out of it.
 *
 * Nothing is armed until a job has finished and a mark (or claim) has answered. The estimates move as ReadAhead's
 * (movingAverage): jobs turning slow stop being armed within a few samples. Pure: no clock, no I/O.
 */
export class StartAhead {
  /** Moving average of the handler's duration, ms; NaN until a job has finished. */
  private jobMs = NaN;
  /** Moving average of the start mark's (or claim's) round trip, ms; NaN until one has answered. */
  private markMs = NaN;

  /** `concurrency` changes with the queue's limits at runtime (QueueWorker.applyLimits). */
  constructor(public concurrency: number) {}

  /** A handler returned (or threw) after `ms`. */
  jobFinished(ms: number): void {
    this.jobMs = movingAverage(this.jobMs, ms);
  }

  /** A start mark (or a claim that marked jobs) answered after `ms`. */
  markAnswered(ms: number): void {
    this.markMs = movingAverage(this.markMs, ms);
  }

  /**
   * No slot has freed for `ms` while all were busy: every running job has taken at least that long, a sample when
   * it is above the estimate (as ReadAhead.stalled), so that jobs turned slow or stuck stop holding armed jobs.
   */
  stalled(ms: number): void {
    if (!(this.jobMs >= ms)) this.jobFinished(ms);
  }

  /** Jobs to hold started ahead of the free slots now: 0 until both estimates exist. */
  get depth(): number {
    const ahead = Math.round((this.concurrency * this.markMs) / Math.max(this.jobMs, 0.001));
    return ahead >= 0 ? ahead : 0; // NaN (an estimate missing) >= 0 is false
  }
}
