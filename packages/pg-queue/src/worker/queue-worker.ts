import type { LoggerService } from '@nestjs/common';
import { JobAbortedError, JobSnoozedError, JobTimeoutError } from '../errors/pg-queue.error.js';
import type { JobEventName, JobEvents } from '../events/job-events.js';
import type { Job, JobStatus } from '../interfaces/job.interface.js';
import type { ResolvedHandlerOptions } from '../interfaces/job-handler-options.interface.js';
import type { ClaimedJob, ClaimLimits, JobRef, JobStore } from '../store/job.store.js';
import { BAD_SNOOZE_DELAY, READ_AHEAD_GIVEN_BACK, READ_AHEAD_NOT_GIVEN_BACK } from '../pg-queue.messages.js';
import { retryDelay, snoozeDelay } from '../utils/backoff.js';
import { errorLine, errorText } from '../utils/error-text.js';
import { hasLimits } from '../utils/resolve-options.js';
import { RetryBackoff, wakeableSleep, withDeadline } from '../utils/retry-backoff.js';
import { JobAttempt } from './job-attempt.js';
import type { LeaseHolder, LeaseKeeper } from './lease-keeper.js';
import type { OutcomeWriter, PendingOutcome } from './outcome-writer.js';
import { putBack } from './put-back.js';
import { ReadAhead } from './read-ahead.js';
import type { RowLockLane } from './row-lock-lane.js';
import { tracingActive } from '../tracing/tracer.js';
import { ResultRefusedError, storedResult } from './stored-result.js';

/** How soon a queue at its globalConcurrency looks again for a slot freed in another process. */
const LIMIT_POLL_MS = 200;
/** How often `prefetch: 'auto'` checks, while its buffer holds jobs and no slot frees, whether to give some back. */
const BUFFER_REVIEW_MS = 250;

export interface QueueWorkerConfig {
  queue: string;
  handlerName: string;
  workerId: string;
  leaseMs: number;
  options: ResolvedHandlerOptions;
  handle: (job: Job) => unknown;
  /** The module's maxResultBytes: a larger result fails the attempt for good. */
  maxResultBytes: number;
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
  private readonly buffered = new Map<string, Running>();
  /** `prefetch: 'auto'`: sizes the read-ahead from measured durations; undefined for a fixed prefetch. */
  private readonly readAhead: ReadAhead | undefined;
  /** The fixed prefetch (0 with 'auto': readAhead decides). */
  private readonly prefetch: number;
  /** performance.now() when a slot last freed ('auto': how long the running jobs have taken at least). */
  private lastFreedAt = 0;
  private reviewTimer: NodeJS.Timeout | undefined;
  private lastReviewAt = 0;
  /** Attempts finished but whose outcome is not written yet; their leases are still held. */
  private unwritten = 0;
  /** The claim loop sleeps until unwritten outcomes drop below unwrittenLimit. */
  private waitingOnWrites = false;
  private whenIdle: (() => void)[] = [];
  private wakeRequested = true;
  private wakeUp: (() => void) | undefined;
  private stopping = false;
  private loop: Promise<void> | undefined;
  private delayTimer: NodeJS.Timeout | undefined;
  private delayTimerAt = Infinity;
  private readonly claimBackoff: RetryBackoff;
  /** A bad answer of the queue's backoff function is logged once per worker, not once per failed job. */
  private backoffProblemLogged = false;
  /** Set for a queue with limits across instances: its claims go through claimLimitedJobs. */
  private readonly limits: ClaimLimits | undefined;
  /** performance.now() before which a limit of the queue allows no claim (see hold()). */
  private heldUntil = 0;
  private holdLiftable = false;
  private holdTimer: NodeJS.Timeout | undefined;
  /** concurrencyPerKey: the key this worker's next claim starts its turn after. */
  private keyCursor = '';
  /** performance.now() when the claim in flight was sent (0: none), and whether the loop has ended: for health checks. */
  private claimSentAt = 0;
  private loopEnded = false;

  constructor(
    private readonly config: QueueWorkerConfig,
    private readonly store: JobStore,
    private readonly leases: LeaseKeeper,
    private readonly outcomes: OutcomeWriter,
    private readonly logger: LoggerService,
    private readonly events: JobEvents,
    /** The lane of this process's row-locking statements: a buffer given back runs in it (see giveBackSurplus). */
    private readonly lane: RowLockLane,
  ) {
    this.claimBackoff = new RetryBackoff(`claiming jobs of queue "${config.queue}"`, logger);
    const { globalConcurrency, rateLimit, concurrencyPerKey, prefetch, concurrency } = config.options;
    if (hasLimits(config.options)) this.limits = { globalConcurrency, rateLimit, concurrencyPerKey };
    // resolveHandlerOptions never leaves 'auto' on a queue with limits; the check keeps the two in step.
    this.readAhead = prefetch === 'auto' && !this.limits ? new ReadAhead(concurrency) : undefined;
    this.prefetch = prefetch === 'auto' ? 0 : prefetch;
  }

  get queue(): string {
    return this.config.queue;
  }

  get activeCount(): number {
    return this.running.size;
  }

  /** The claim loop, read by health checks: how long its claim in flight has waited (0: none), and whether it has ended. */
  get claimLoopState(): { claimingForMs: number; ended: boolean } {
    return { claimingForMs: this.claimSentAt === 0 ? 0 : performance.now() - this.claimSentAt, ended: this.loopEnded };
  }

  start(): void {
    if (this.readAhead && !this.loop) {
      this.lastReviewAt = performance.now();
      this.reviewTimer = setInterval(() => this.reviewBuffer(), BUFFER_REVIEW_MS).unref();
    }
    this.loop ??= this.claimLoop().finally(() => (this.loopEnded = true));
  }

  /** Look for work now (NOTIFY, poll, reconnect). */
  wake(): void {
    this.wakeRequested = true;
    this.rouse();
  }

  /** Lets a sleeping claim loop look again, without saying there is new work (wakeRequested stays as it is). */
  private rouse(): void {
    const wakeUp = this.wakeUp;
    this.wakeUp = undefined;
    wakeUp?.();
  }

  /**
   * Aborts a running job whose row was cancelled; its outcome is fenced out by the cancelled status. Only the
   * claim the cancel names (`token`; undefined: whichever): a late notice must not abort a later claim of the
   * same job (retried and claimed again).
   */
  abort(jobId: string, token: string | undefined, reason: Error): boolean {
    const waiting = this.buffered.get(jobId);
    if (waiting && (token === undefined || waiting.token === token)) return this.unbuffer(waiting);
    const run = this.running.get(jobId);
    if (!run || (token !== undefined && run.token !== token)) return false;
    run.abort(reason);
    this.giveUp(run);
    this.emit('cancelled', run, { error: reason });
    return true;
  }

  /** Stop claiming; running jobs keep going. */
  async stopClaiming(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.delayTimer);
    clearTimeout(this.holdTimer);
    clearInterval(this.reviewTimer);
    this.heldUntil = 0;
    this.wake();
    await this.loop;
  }

  /** Resolves when no handler is running any more, or after graceMs. */
  async drain(graceMs: number): Promise<void> {
    if (this.running.size === 0) return;
    await withDeadline(new Promise<void>((resolve) => this.whenIdle.push(resolve)), graceMs);
  }

  /**
   * Shutdown past the grace period: abort what still runs, drop what was prefetched but never started, and
   * forget both (the caller puts the rows back).
   */
  abandonAll(): { aborted: JobRef[]; unstarted: JobRef[] } {
    const left = [...this.running.values()];
    for (const run of left) {
      run.abort(new JobAbortedError('worker is shutting down; the job is put back in the queue'));
      this.giveUp(run);
    }
    const unstarted = [...this.buffered.values()];
    for (const run of unstarted) this.unbuffer(run);
    return { aborted: left, unstarted };
  }

  private async claimLoop(): Promise<void> {
    const { queue, workerId, leaseMs } = this.config;
    while (!this.stopping) {
      const want = this.claimSize();
      // Back-pressure: while a full turn of outcomes waits to be written, claiming more only grows the pile.
      // Unbounded, a slow database let thousands of finished jobs sit in `processing` until their leases ran
      // out and they ran again.
      const writesBehind = this.unwritten >= this.unwrittenLimit;
      if (want === 0 || !this.wakeRequested || writesBehind || this.heldUntil > performance.now()) {
        this.waitingOnWrites = writesBehind;
        await new Promise<void>((resolve) => (this.wakeUp = resolve));
        continue;
      }
      this.wakeRequested = false;
      let claimed;
      const aheadAtClaim = this.readAhead?.size ?? 0;
      this.claimSentAt = performance.now();
      try {
        claimed = this.limits
          ? await this.store.claimLimitedJobs(queue, want, workerId, leaseMs, this.limits, this.keyCursor)
          : await this.store.claimJobs(queue, want, workerId, leaseMs, this.events.observed || tracingActive());
        this.claimBackoff.succeeded();
        this.readAhead?.claimed(performance.now() - this.claimSentAt, aheadAtClaim);
      } catch (error) {
        this.claimSentAt = 0;
        this.wakeRequested = true; // try again after the backoff, or sooner when woken (LISTEN is back)
        const backoff = wakeableSleep(this.claimBackoff.failed(error));
        this.wakeUp = backoff.wake;
        await backoff.done;
        if (this.wakeUp === backoff.wake) this.wakeUp = undefined;
        continue;
      }
      this.claimSentAt = 0;
      if (this.stopping) {
        // The claim was in flight when shutdown began: none of its jobs may start; they go back at once.
        await putBack(this.store, workerId, claimed.jobs, `claimed while shutting down (${queue})`, this.logger);
        return;
      }
      if (claimed.keyCursor !== undefined) this.keyCursor = claimed.keyCursor;
      for (const job of claimed.jobs) this.accept(job);
      if (claimed.jobs.length === want) this.wakeRequested = true; // more may be waiting
      else if (claimed.rateWaitMs != null) this.hold(claimed.rateWaitMs, false);
      else if (claimed.atCapacity) this.hold(LIMIT_POLL_MS, true);
      else if (claimed.nextDueMs !== null) this.wakeAt(claimed.nextDueMs);
    }
  }

  /**
   * A limit of the queue stops claims for `ms` (wake-ups meanwhile are kept, not acted on: a NOTIFY storm
   * must not become a storm of claims that each take the queue's lock to find no slot). At capacity, an
   * outcome of this process written (a slot freed) ends the hold at once (`liftable`); a slot freed in
   * another process is seen at the next look, LIMIT_POLL_MS later (nothing tells this process of it).
   */
  private hold(ms: number, liftable: boolean): void {
    this.wakeRequested = true;
    this.heldUntil = performance.now() + ms;
    this.holdLiftable = liftable;
    clearTimeout(this.holdTimer);
    this.holdTimer = setTimeout(() => {
      this.heldUntil = 0;
      this.rouse();
    }, Math.ceil(ms));
  }

  /** A full turn of jobs: while this many outcomes wait to be written, the loop claims no more. */
  private get unwrittenLimit(): number {
    return this.config.options.concurrency + (this.readAhead ? this.readAhead.size : this.prefetch);
  }

  /**
   * How many jobs a claim should ask for now; 0 when it is not worth a round trip yet. With prefetch, claims
   * run ahead of free slots so that one round trip brings a whole batch (no-op jobs at concurrency 10 were
   * bound by one claim round trip per 10 jobs); the buffer is topped up only when half a batch fits. With
   * 'auto', the read-ahead and so the batch follow the measured durations (ReadAhead).
   */
  private claimSize(): number {
    const { batchSize } = this.config.options;
    const turn = this.unwrittenLimit; // the slots plus the read-ahead: as many jobs as this worker may hold
    const batch = this.readAhead ? Math.min(batchSize, turn) : batchSize;
    const want = Math.min(batch, turn - this.running.size - this.buffered.size);
    return want > 0 && (this.buffered.size === 0 || want >= Math.ceil(batch / 2)) ? want : 0;
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

  /**
   * A claimed job runs now if a slot is free, else waits in the prefetch buffer. Either way its lease is held
   * from here on. One object per attempt serves as the handler's Job, the lease holder and the pending
   * outcome: at 20k jobs/s the garbage collector had taken 12% of the worker's CPU.
   */
  private accept(job: ClaimedJob): void {
    const run = new Running(this.config.queue, job, this);
    // An older attempt of this job still in our books: this process stalled past its lease (frozen, a blocked
    // event loop), the sweeper put the job back and we claimed it again before a heartbeat could tell us.
    // That attempt is lost; retire it now, or its late settle would free this attempt's slot and lease.
    const stale = this.running.get(job.id) ?? this.buffered.get(job.id);
    if (stale) this.leaseLost(stale);
    this.leases.hold(run);
    if (this.running.size < this.config.options.concurrency) this.run(run);
    else this.buffered.set(job.id, run);
  }

  /** Fills free slots from the prefetch buffer, without a round trip. Nothing new starts once stopping. */
  private startBuffered(): void {
    for (const run of this.buffered.values()) {
      if (this.stopping || this.running.size >= this.config.options.concurrency) return;
      this.buffered.delete(run.id);
      this.run(run);
    }
  }

  private run(run: Running): void {
    const { options, handle } = this.config;
    this.running.set(run.id, run);
    run.startedAt = performance.now();
    if (this.events.observed) this.emit('active', run, { claimLatencyMs: run.claimLatencyMs });
    // Only jobs with a timeout pay for a timer.
    if (options.timeoutMs !== undefined) {
      const timeoutMs = options.timeoutMs;
      run.timer = setTimeout(() => {
        const error = new JobTimeoutError(timeoutMs);
        run.abort(error);
        this.settle(run, error);
      }, timeoutMs);
    }
    let result: unknown;
    try {
      result = handle(run);
    } catch (error) {
      // A handler may also throw synchronously. Settling is deferred like a rejection's would be, so that the
      // claim loop is never re-entered from inside run().
      queueMicrotask(() => this.settle(run, error ?? new Error(`handler threw ${String(error)}`)));
      return;
    }
    if (isThenable(result)) {
      result.then(
        (value) => this.settle(run, undefined, value),
        (error: unknown) => this.settle(run, error ?? new Error(`handler rejected with ${String(error)}`)),
      );
    } else {
      queueMicrotask(() => this.settle(run, undefined, result));
    }
  }

  /** Records the attempt's outcome once; frees the slot at once, keeps the lease until the write lands. */
  private settle(run: Running, error: unknown, result?: unknown): void {
    if (run.settled) return;
    this.free(run);
    if (this.readAhead) {
      this.readAhead.jobFinished(run.endedAt - run.startedAt);
      if (this.buffered.size > 0) this.giveBackSurplus();
    }
    run.result = result;
    this.unwritten += 1;
    // A result is stored only when there is one (undefined and null store nothing and cost one comparison).
    if (error === undefined && result != null) error = this.storeResult(run, result);
    if (error instanceof ResultRefusedError) {
      run.failure = { error: error.message, retryDelayMs: 0, thrown: error, final: true };
    } else if (error instanceof JobSnoozedError) {
      const { delayMs, clamped } = snoozeDelay(error.delayMs);
      if (clamped) this.logger.warn(BAD_SNOOZE_DELAY(this.config.queue, run.id, error.delayMs, delayMs));
      run.snoozeMs = delayMs;
    } else if (error !== undefined) {
      let retryDelayMs = 0;
      if (run.attempt < run.maxAttempts) {
        const delay = retryDelay(this.config.options.backoff, run.attempt, error, this.config.queue);
        retryDelayMs = delay.delayMs;
        if (delay.problem !== undefined && !this.backoffProblemLogged) {
          this.backoffProblemLogged = true;
          this.logger.error(`${delay.problem} (job ${run.id}; further bad answers of this backoff are not logged)`);
        }
      }
      run.failure = { error: errorText(error), retryDelayMs, thrown: error };
    }
    this.outcomes.write(run); // calls back outcomeWritten() or outcomeDropped()
  }

  /**
   * The result as JSON text on the attempt, or the error that fails the job for good: a result the queue
   * cannot store would be the same on every retry.
   */
  private storeResult(run: Running, result: unknown): ResultRefusedError | undefined {
    const stored = storedResult(this.config.queue, run.id, result, this.config.maxResultBytes);
    if ('refused' in stored) return stored.refused;
    run.resultJson = stored.json;
    return undefined;
  }

  /** @internal The outcome of this attempt was written (status: what the row became) or fenced out (undefined). */
  outcomeWritten(run: Running, status: JobStatus | undefined): void {
    this.written(run);
    const { queue, workerId } = this.config;
    const failure = run.failure;
    if (status === undefined) {
      const what = run.snoozeMs !== undefined ? 'snoozed' : failure ? 'failed' : 'finished';
      this.logger.warn(`job ${run.id} (${queue}) ${what} on ${workerId}, but it no longer held the job: outcome discarded`);
    } else if (run.snoozeMs !== undefined) {
      this.wakeAt(run.snoozeMs); // after the write, so the job is there to claim
    } else if (!failure) {
      if (this.events.observed) this.emit('completed', run, { result: run.result });
    } else if (status === 'failed') {
      this.logger.error(`job ${run.id} (${queue}) failed for good after ${run.attempt} attempt(s): ${errorLine(failure.thrown)}`);
      if (this.events.observed) {
        this.emit('failed', run, { error: failure.thrown });
        this.emit('dead', run, { error: failure.thrown });
      }
    } else {
      this.logger.warn(`job ${run.id} (${queue}) attempt ${run.attempt}/${run.maxAttempts} failed, retry in ${failure.retryDelayMs} ms: ${errorLine(failure.thrown)}`);
      this.wakeAt(failure.retryDelayMs); // after the write, so the retry is there to claim
      if (this.events.observed) {
        this.emit('failed', run, { error: failure.thrown });
        this.emit('retrying', run, { error: failure.thrown, retryDelayMs: failure.retryDelayMs });
      }
    }
  }

  /** Hands one event of this attempt to the JobEvents listeners (callers check `observed` first on hot paths). */
  private emit(name: JobEventName, run: Running, extra: { result?: unknown; error?: unknown; retryDelayMs?: number; claimLatencyMs?: number } = {}): void {
    if (!this.events.observed) return;
    const durationMs = name === 'active' ? 0 : (run.endedAt || performance.now()) - run.startedAt;
    this.events.emit({ name, job: run, workerId: this.config.workerId, durationMs, ...extra });
  }

  /** @internal The outcome landed, was fenced out, or was given up on: this claim's lease is no longer renewed. */
  written(run: Running): void {
    this.leases.release(run.id, run.token);
    this.unwritten -= 1;
    // Below the back-pressure mark: the claim loop may be waiting on writes only.
    if (this.waitingOnWrites && this.unwritten < this.unwrittenLimit) {
      this.waitingOnWrites = false;
      this.rouse();
    }
    // The row left `processing` (or is no longer ours): at capacity, that is a slot this process freed.
    if (this.holdLiftable) {
      this.holdLiftable = false;
      this.heldUntil = 0;
      clearTimeout(this.holdTimer);
      this.rouse();
    }
  }

  /** @internal The heartbeat found the row no longer ours (swept after a freeze, cancelled). */
  leaseLost(run: Running): void {
    if (this.buffered.get(run.id) === run) {
      this.unbuffer(run);
      return;
    }
    if (run.settled) return;
    const reason = new JobAbortedError('lease lost: the job was taken back (swept, cancelled) while running');
    run.abort(reason);
    this.logger.warn(`job ${run.id} (${this.config.queue}, attempt ${run.attempt}) lost its lease while running; its outcome will be discarded`);
    this.giveUp(run);
    this.emit('lease-lost', run, { error: reason });
  }

  /** Drops a prefetched job that never started, with its lease hold. */
  private unbuffer(run: Running): true {
    this.buffered.delete(run.id);
    this.leases.release(run.id, run.token);
    return true;
  }

  /** The job is no longer ours to settle (lease lost, cancelled, abandoned at shutdown). */
  private giveUp(run: Running): void {
    if (run.settled) return;
    this.free(run);
    this.leases.release(run.id, run.token);
  }

  /** Ends the attempt's hold on its slot and starts the next job: from the prefetch buffer, else by a claim. */
  private free(run: Running): void {
    run.settled = true;
    run.endedAt = this.lastFreedAt = performance.now();
    clearTimeout(run.timer);
    if (this.running.get(run.id) === run) this.running.delete(run.id);
    if (this.running.size === 0 && this.whenIdle.length) for (const resolve of this.whenIdle.splice(0)) resolve();
    this.startBuffered();
    // More work may be waiting, but the claim loop is only woken when a claim is worth making: waking it after
    // every job (to find nothing worth claiming) cost a promise and a loop turn per job.
    this.wakeRequested = true;
    if (this.claimSize() > 0) this.wake();
  }

  /**
   * 'auto', every BUFFER_REVIEW_MS: jobs running far longer than the estimate (a burst of slow jobs, a handler
   * stuck) are seen before any of them finishes, by how long no slot has freed while all are busy. A tick that
   * comes late means this process itself was stalled (a blocked event loop, the machine busy): the settles it
   * has not seen yet say nothing about the jobs, so that tick does not count.
   */
  private reviewBuffer(): void {
    const now = performance.now();
    const late = now - this.lastReviewAt > 2 * BUFFER_REVIEW_MS;
    this.lastReviewAt = now;
    if (late || this.buffered.size === 0 || this.running.size < this.config.options.concurrency) return;
    this.readAhead!.stalled(now - this.lastFreedAt);
    this.giveBackSurplus();
  }

  /**
   * 'auto': gives back the buffered jobs the current estimate says this process should not hold (ReadAhead.surplus),
   * the last claimed first, so that another process can start them. Put back like at shutdown (queued, run_at
   * now, the attempt not counted, NOTIFY): in the lane, since the heartbeat updates the same rows. Rare (when
   * the jobs' durations change), never per job. If the database does not take them back, their leases lapse
   * and the sweeper puts them back (counting the attempt, as for a crashed worker).
   */
  private giveBackSurplus(): void {
    const surplus = this.readAhead!.surplus(this.buffered.size);
    if (surplus === 0 || this.stopping) return;
    const runs = [...this.buffered.values()].slice(-surplus);
    for (const run of runs) this.unbuffer(run);
    const { queue, workerId } = this.config;
    this.lane.run(() => this.store.releaseJobs(workerId, runs)).then(
      (released) => this.logger.debug?.(READ_AHEAD_GIVEN_BACK(queue, released)),
      (error: unknown) => this.logger.warn(READ_AHEAD_NOT_GIVEN_BACK(queue, runs.length, errorLine(error))),
    );
  }
}

/**
 * One attempt: the Job its handler sees (JobAttempt), the lease holder the heartbeat renews, and the pending
 * outcome the outcome writer settles, in one object.
 */
class Running extends JobAttempt implements LeaseHolder, PendingOutcome {
  readonly token: string;
  timer: NodeJS.Timeout | undefined;
  /** Set once the attempt has an outcome (or was given up); later results of the handler are ignored. */
  settled = false;
  failure: { error: string; retryDelayMs: number; thrown: unknown; final?: boolean } | undefined;
  snoozeMs: number | undefined;
  refusals = 0;
  /** performance.now() when the handler was called, and when it returned, threw or was given up on. */
  startedAt = 0;
  endedAt = 0;
  /** What the handler returned (a completion only). */
  result: unknown;
  /** Due to claimed, by the database clock (the 'active' event carries it). */
  readonly claimLatencyMs: number | undefined;
  /** The result as JSON text, when there is one to store. */
  resultJson: string | undefined;

  constructor(
    queue: string,
    job: ClaimedJob,
    private readonly worker: QueueWorker,
  ) {
    super(queue, job);
    this.token = job.token;
    this.claimLatencyMs = job.waitMs;
  }

  leaseLost(): void {
    this.worker.leaseLost(this);
  }

  outcomeWritten(status: JobStatus | undefined): void {
    this.worker.outcomeWritten(this, status);
  }

  outcomeDropped(): void {
    this.worker.written(this);
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}
