import { LATE_STARTS } from '../pg-queue.messages.js';
import { errorLine } from '../utils/error-text.js';
import type { HeldJob } from './held-job.js';
import type { RunningJobs } from './running-jobs.js';
import type { WorkerState } from './worker-state.js';

/** A start mark that failed (the database unreachable or busy) is sent again this much later, its jobs still waiting. */
const MARK_RETRY_MS = 100;

/**
 * The start mark (issue 39): a job taken from the buffer (or back from an eager insert, buffered) holds its slot in
 * state `starting` until its row says started: one statement (JobStore.markStarted: fenced by this worker and the
 * claim's fence token, charged, `buffered = false`, the full lease) for every job gathered, one in flight at a time;
 * on its answer the jobs it marked start in claim order, or are armed (no slot free yet), and those it refused are
 * lost, never started. Why it runs outside the RowLockLane, and what it makes true: QueueWorker.pump.
 */
export class StartMarks {
  /** Jobs whose start mark waits for the next statement (the one in flight, if any, answers first), in claim order. */
  private gathered: HeldJob[] = [];
  /** state.reviews when the first job of `gathered` was taken: a review asked since sends the marked jobs back. */
  private gatheredAtReview = 0;
  /** The start mark in flight (stopClaiming waits for it), and the timer of a failed one's retry. */
  private markInFlight: Promise<void> | undefined;
  private markRetry: NodeJS.Timeout | undefined;

  constructor(
    private readonly state: WorkerState,
    private readonly runs: RunningJobs,
    private readonly pump: () => void,
    /** LeaseAnswers.askForCheck: nothing more starts from the buffer until a heartbeat has checked it, sent now. */
    private readonly askForCheck: () => void,
  ) {}

  /** The start mark in flight, if any (QueueWorker.stopClaiming waits for it). */
  get inFlight(): Promise<void> | undefined {
    return this.markInFlight;
  }

  /** How many jobs wait for the next start mark. */
  get waiting(): number {
    return this.gathered.length;
  }

  /** A job takes its slot in state `starting`; its start mark goes with the next statement (send). */
  gather(job: HeldJob): void {
    job.to('starting');
    this.state.slots.starting += 1;
    if (this.gathered.length === 0) this.gatheredAtReview = this.state.reviews;
    this.gathered.push(job);
  }

  /** A `starting` job leaves (cancelled, lost): its slot frees, and its mark is not sent if it was still waiting. */
  drop(job: HeldJob): void {
    this.state.slots.starting -= 1;
    const i = this.gathered.indexOf(job);
    if (i >= 0) this.gathered.splice(i, 1);
    this.state.buffer.slotFreed();
  }

  /**
   * Sends one start mark for every job gathered, unless one is in flight (its answer sends the next) or stopping. Sent
   * from a microtask: the slots that free in one turn of the event loop (the jobs of one start, ending together)
   * gather into one mark. Sent at once, the first freed slot's mark went alone and the others waited for it: marks
   * of half the slots each, half the starts per round trip with no-op jobs.
   */
  send(): void {
    if (this.markInFlight || this.markRetry || this.state.stopping || this.gathered.length === 0) return;
    this.markInFlight = new Promise<void>((resolve) => queueMicrotask(() => resolve(this.flush())));
  }

  private flush(): Promise<void> | undefined {
    if (this.state.stopping || this.gathered.length === 0) {
      this.markInFlight = undefined;
      return undefined; // stopping: stopClaiming gives back the jobs gathered
    }
    const batch = this.gathered;
    this.gathered = [];
    const sentAt = performance.now();
    const review = this.gatheredAtReview;
    const { workerId, leaseMs } = this.state.config;
    return this.state.shared.store.markStarted(workerId, leaseMs, batch).then(
      (marked) => this.marked(batch, marked, sentAt, review),
      (error: unknown) => this.failed(batch, error, review),
    );
  }

  /**
   * A start mark answered: the jobs it marked start, in claim order, while slots are free; the rest are `armed` (marked
   * ahead: they start as slots free, see QueueWorker.startFromBuffer). The ones it refused are no longer ours. A review
   * asked while it was in flight (a pause in this process: LeaseAnswers.checkBuffer) sends the marked jobs back instead.
   */
  private marked(batch: HeldJob[], marked: Set<string>, sentAt: number, review: number): void {
    this.markInFlight = undefined;
    const now = performance.now();
    const { state } = this;
    state.startAhead?.markAnswered(now - sentAt);
    state.guarded('starting marked jobs', () => {
      // As for a claim's jobs (accept): the row's full lease counts from the mark; start in its first half.
      const runBy = state.deadlines.started(sentAt);
      const reviewed = state.reviews !== review;
      const late: HeldJob[] = [];
      let refused = false;
      for (const job of batch) {
        if (job.state !== 'starting') continue; // cancelled or lost while its mark was on its way: its slot is free already
        state.slots.starting -= 1;
        const place = state.slots.afterMark(marked.has(job.id), state.stopping || reviewed, state.armed.length);
        if (place === 'lost') {
          state.forget(job);
          job.to('lost');
          state.buffer.slotFreed();
          refused = true;
          continue;
        }
        job.startBy = runBy;
        if (place === 'give-back') late.push(job);
        else if (place === 'arm') {
          state.arm(job);
        } else if (!this.runs.startJob(job)) late.push(job);
      }
      // The mark refused a job: its row was cancelled, replaced, swept, or given back for a pause or a 429 block whose
      // notice has not come (or was lost). The rest of the buffer is checked in one statement (the heartbeat's check
      // gives back what must not start) before anything more starts from it, not found out one mark per free slot.
      if (refused) this.askForCheck();
      if (late.length && reviewed && !state.stopping) {
        void state.giveBack(late, 'its queue was paused (or a notice asked for a check) while their start mark was on its way');
      } else if (late.length) {
        const { queue, leaseMs } = state.config;
        if (!state.stopping) state.shared.logger.warn(LATE_STARTS(queue, late.length, Math.round(performance.now() - sentAt), leaseMs));
        void state.giveBack(late, state.stopping ? 'shutting down' : 'not started in time: this process stalled while starting them');
      }
    });
    this.pump();
  }

  /**
   * A start mark failed (the database unreachable or busy; it wrote nothing, or its answer was lost after it landed):
   * its jobs keep their slots and are marked again shortly, first in line. The mark is fenced by the claim, so a row
   * taken back meanwhile (the short lease lapsed, then swept) is refused then, and never started.
   */
  private failed(batch: HeldJob[], error: unknown, review: number): void {
    this.markInFlight = undefined;
    const waiting = batch.filter((job) => job.state === 'starting');
    if (waiting.length === 0) return this.pump();
    this.state.shared.logger.warn(`queue "${this.state.config.queue}": the start mark of ${waiting.length} job(s) failed (${errorLine(error)}); trying again`);
    this.gathered.unshift(...waiting);
    // The older batch's review goes with them (a review since then sends the whole next mark's jobs back).
    this.gatheredAtReview = review;
    this.markRetry = setTimeout(() => {
      this.markRetry = undefined;
      this.send();
    }, MARK_RETRY_MS);
  }

  /**
   * Shutdown, once no mark is in flight: the retry is dropped, and the jobs still waiting for a mark leave `starting`
   * (their slots free), returned for the caller to give back.
   */
  takeWaiting(): HeldJob[] {
    clearTimeout(this.markRetry);
    this.markRetry = undefined;
    const waiting = this.gathered.splice(0).filter((job) => job.state === 'starting');
    this.state.slots.starting -= waiting.length;
    return waiting;
  }
}
