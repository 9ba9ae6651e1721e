import type { LoggerService } from '@nestjs/common';
import { JobAbortedError, JobTimeoutError } from '../errors/pg-queue.error.js';
import type { Job } from '../interfaces/job.interface.js';
import type { ResolvedHandlerOptions } from '../interfaces/job-handler-options.interface.js';
import type { ClaimedJob, JobStore } from '../store/job.store.js';
import { errorLine, errorText } from '../utils/error-text.js';
import { RetryBackoff, withDeadline } from '../utils/retry-backoff.js';
import type { LeaseKeeper } from './lease-keeper.js';
import type { OutcomeWriter } from './outcome-writer.js';

export interface QueueWorkerConfig {
  queue: string;
  handlerName: string;
  workerId: string;
  leaseMs: number;
  options: ResolvedHandlerOptions;
  handle: (job: Job) => unknown;
}

interface Running {
  job: ClaimedJob;
  controller: AbortController;
  timer: NodeJS.Timeout | undefined;
  /** Set once the attempt has an outcome (or was given up); later results of the handler are ignored. */
  settled: boolean;
  finished: Promise<void>;
}

/**
 * The claim-run-settle loop of one queue, with `concurrency` slots. No Nest imports, so it runs and tests
 * alone. Claim, run and record are separate steps: no transaction or connection is held while a handler runs.
 *
 * The loop sleeps until woken by: a NOTIFY for its queue, a slot freeing up, the timer of the next delayed
 * job (learned from the claim itself), or the pool's poll. Wake-ups coalesce into one flag, so a burst of
 * 10k notifications costs one claim, not 10k.
 */
export class QueueWorker {
  private readonly running = new Map<string, Running>();
  /** Claimed ahead of a free slot (the `prefetch` option); their leases are held and renewed like running ones. */
  private readonly buffered = new Map<string, ClaimedJob>();
  /** Attempts finished but whose outcome is not written yet; their leases are still held. */
  private unwritten = 0;
  private wakeRequested = true;
  private wakeUp: (() => void) | undefined;
  private stopping = false;
  private loop: Promise<void> | undefined;
  private delayTimer: NodeJS.Timeout | undefined;
  private delayTimerAt = Infinity;
  private readonly claimBackoff: RetryBackoff;

  constructor(
    private readonly config: QueueWorkerConfig,
    private readonly store: JobStore,
    private readonly leases: LeaseKeeper,
    private readonly outcomes: OutcomeWriter,
    private readonly logger: LoggerService,
  ) {
    this.claimBackoff = new RetryBackoff(`claiming jobs of queue "${config.queue}"`, logger);
  }

  get queue(): string {
    return this.config.queue;
  }

  get activeCount(): number {
    return this.running.size;
  }

  start(): void {
    this.loop ??= this.claimLoop();
  }

  /** Look for work now (NOTIFY, poll, reconnect). */
  wake(): void {
    this.wakeRequested = true;
    const wakeUp = this.wakeUp;
    this.wakeUp = undefined;
    wakeUp?.();
  }

  /** Aborts a running job whose row was cancelled; its outcome is fenced out by the cancelled status. */
  abort(jobId: string, reason: Error): boolean {
    const waiting = this.buffered.get(jobId);
    if (waiting) {
      this.buffered.delete(jobId);
      this.leases.release(jobId, waiting.attempt);
      return true;
    }
    const run = this.running.get(jobId);
    if (!run) return false;
    run.controller.abort(reason);
    this.giveUp(run);
    return true;
  }

  /** Stop claiming; running jobs keep going. */
  async stopClaiming(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.delayTimer);
    this.wake();
    await this.loop;
  }

  /** Resolves when every running handler has finished, or after graceMs; returns what is still running. */
  async drain(graceMs: number): Promise<ClaimedJob[]> {
    await withDeadline(Promise.all([...this.running.values()].map((r) => r.finished)), graceMs);
    return [...this.running.values()].map((r) => r.job);
  }

  /**
   * Shutdown past the grace period: abort what still runs, drop what was prefetched but never started, and
   * forget both (the caller puts the rows back).
   */
  abandonAll(): { aborted: ClaimedJob[]; unstarted: ClaimedJob[] } {
    const left = [...this.running.values()];
    for (const run of left) {
      run.controller.abort(new JobAbortedError('worker is shutting down; the job is put back in the queue'));
      this.giveUp(run);
    }
    const unstarted = [...this.buffered.values()];
    for (const job of unstarted) this.leases.release(job.id, job.attempt);
    this.buffered.clear();
    return { aborted: left.map((r) => r.job), unstarted };
  }

  private async claimLoop(): Promise<void> {
    const { queue, workerId, leaseMs, options } = this.config;
    while (!this.stopping) {
      // With prefetch, claims run ahead of free slots so that one round trip brings a whole batch (no-op jobs
      // at concurrency 10 were bound by one claim round trip per 10 jobs); top up only when half a batch fits.
      const inHand = this.running.size + this.buffered.size;
      const want = Math.min(options.batchSize, options.concurrency + options.prefetch - inHand);
      const worthIt = want > 0 && (this.buffered.size === 0 || want >= Math.ceil(options.batchSize / 2));
      // Back-pressure: while a full turn of outcomes waits to be written, claiming more only grows the pile.
      // Unbounded, a slow database let thousands of finished jobs sit in `processing` until their leases ran
      // out and they ran again.
      const writesBehind = this.unwritten >= options.concurrency + options.prefetch;
      if (!worthIt || !this.wakeRequested || writesBehind) {
        await new Promise<void>((resolve) => (this.wakeUp = resolve));
        continue;
      }
      this.wakeRequested = false;
      let claimed;
      try {
        claimed = await this.store.claimJobs(queue, want, workerId, leaseMs);
        this.claimBackoff.succeeded();
      } catch (error) {
        this.wakeRequested = true; // try again after the backoff...
        await this.sleepUnlessWoken(this.claimBackoff.failed(error)); // ...or sooner, when LISTEN is back
        continue;
      }
      for (const job of claimed.jobs) this.accept(job);
      if (claimed.jobs.length === want) this.wakeRequested = true; // more may be waiting
      else if (claimed.nextDueMs !== null) this.wakeAt(claimed.nextDueMs);
    }
  }

  private sleepUnlessWoken(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        if (this.wakeUp === done) this.wakeUp = undefined;
        resolve();
      }, ms);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      this.wakeUp = done;
    });
  }

  /** Arms one timer for the earliest known delayed job; DB-computed delay, so app clock skew does not matter. */
  private wakeAt(delayMs: number): void {
    const at = performance.now() + delayMs;
    if (this.stopping || at >= this.delayTimerAt) return;
    clearTimeout(this.delayTimer);
    this.delayTimerAt = at;
    this.delayTimer = setTimeout(() => {
      this.delayTimerAt = Infinity;
      this.wake();
    }, Math.min(Math.ceil(delayMs) + 1, 2_147_483_647));
  }

  /** A claimed job runs now if a slot is free, else waits in the prefetch buffer with its lease held. */
  private accept(job: ClaimedJob): void {
    if (this.running.size < this.config.options.concurrency) return this.run(job);
    this.buffered.set(job.id, job);
    this.leases.hold(job.id, job.attempt, () => {
      if (this.buffered.get(job.id) === job) this.buffered.delete(job.id);
    });
  }

  /** Fills free slots from the prefetch buffer, without a round trip. Nothing new starts once stopping. */
  private startBuffered(): void {
    for (const job of this.buffered.values()) {
      if (this.stopping || this.running.size >= this.config.options.concurrency) return;
      this.buffered.delete(job.id);
      this.run(job);
    }
  }

  private run(job: ClaimedJob): void {
    const { options, handle, queue } = this.config;
    const controller = new AbortController();
    let finish!: () => void;
    const run: Running = { job, controller, timer: undefined, settled: false, finished: new Promise((r) => (finish = r)) };
    // An older attempt of this job still in our books: this process stalled past its lease (frozen, a blocked
    // event loop), the sweeper put the job back and we claimed it again before a heartbeat could tell us.
    // That attempt is lost; retire it now, or its late settle would free this attempt's slot and lease.
    const stale = this.running.get(job.id);
    if (stale) this.leaseLost(stale);
    this.running.set(job.id, run);
    this.leases.hold(job.id, job.attempt, () => this.leaseLost(run));
    const jobView: Job = {
      id: job.id,
      queue,
      payload: job.payload,
      attempt: job.attempt,
      maxAttempts: job.maxAttempts,
      priority: job.priority,
      runAt: job.runAt,
      createdAt: job.createdAt,
      signal: controller.signal,
    };
    // Only jobs with a timeout pay for a timer.
    if (options.timeoutMs !== undefined) {
      const timeoutMs = options.timeoutMs;
      run.timer = setTimeout(() => {
        const error = new JobTimeoutError(timeoutMs);
        controller.abort(error);
        this.settle(run, error);
      }, timeoutMs);
    }
    let result: Promise<unknown>;
    try {
      result = Promise.resolve(handle(jobView)); // a handler may also throw synchronously
    } catch (error) {
      result = Promise.reject(error);
    }
    result.then(
      () => this.settle(run, undefined),
      (error: unknown) => this.settle(run, error ?? new Error(`handler rejected with ${String(error)}`)),
    ).finally(finish);
  }

  /** Records the attempt's outcome once; frees the slot at once, keeps the lease until the write lands. */
  private settle(run: Running, error: unknown): void {
    if (run.settled) return;
    run.settled = true;
    clearTimeout(run.timer);
    this.running.delete(run.job.id);
    this.startBuffered();
    this.wake();
    const { job } = run;
    const { queue, workerId } = this.config;
    this.unwritten += 1;
    const done = () => {
      this.leases.release(job.id, job.attempt);
      this.unwritten -= 1;
      // Just below the back-pressure mark: the claim loop may be waiting on writes only; let it look again
      // (without faking a NOTIFY: wakeRequested stays as it is).
      if (this.unwritten === this.config.options.concurrency + this.config.options.prefetch - 1) {
        const wakeUp = this.wakeUp;
        this.wakeUp = undefined;
        wakeUp?.();
      }
    };
    if (error === undefined) {
      void this.outcomes.complete({ id: job.id, attempt: job.attempt }).then((accepted) => {
        done();
        if (!accepted) this.logger.warn(`job ${job.id} (${queue}) finished on ${workerId}, but it no longer held the job: outcome discarded`);
      });
      return;
    }
    let retryDelayMs = 0;
    if (job.attempt < job.maxAttempts) {
      try {
        retryDelayMs = Math.max(0, Math.round(Number(this.config.options.backoff(job.attempt, error))) || 0);
      } catch (backoffError) {
        this.logger.error(`backoff function of queue "${queue}" threw (${errorLine(backoffError)}); retrying job ${job.id} without delay`);
      }
    }
    const text = errorText(error);
    void this.outcomes.fail({ id: job.id, attempt: job.attempt, error: text, retryDelayMs }).then((status) => {
      done();
      if (status === undefined) this.logger.warn(`job ${job.id} (${queue}) failed on ${workerId}, but it no longer held the job: outcome discarded`);
      else if (status === 'failed') this.logger.error(`job ${job.id} (${queue}) failed for good after ${job.attempt} attempt(s): ${errorLine(error)}`);
      else {
        this.logger.warn(`job ${job.id} (${queue}) attempt ${job.attempt}/${job.maxAttempts} failed, retry in ${retryDelayMs} ms: ${errorLine(error)}`);
        this.wakeAt(retryDelayMs); // after the write, so the retry is there to claim
      }
    });
  }

  private leaseLost(run: Running): void {
    const { job, controller } = run;
    controller.abort(new JobAbortedError('lease lost: the job was taken back (swept, cancelled) while running'));
    this.logger.warn(`job ${job.id} (${this.config.queue}, attempt ${job.attempt}) lost its lease while running; its outcome will be discarded`);
    this.giveUp(run);
  }

  /** The job is no longer ours to settle (lease lost, cancelled, abandoned at shutdown). */
  private giveUp(run: Running): void {
    if (run.settled) return;
    run.settled = true;
    clearTimeout(run.timer);
    this.running.delete(run.job.id);
    this.leases.release(run.job.id, run.job.attempt);
    this.startBuffered();
    this.wake();
  }
}
