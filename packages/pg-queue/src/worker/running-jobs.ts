import { AsyncResource } from 'node:async_hooks';
import { JobAbortedError, JobTimeoutError } from '../errors/pg-queue.error.js';
import type { JobRef } from '../store/job.store.js';
import { errorLine } from '../utils/error-text.js';
import { withDeadline } from '../utils/retry-backoff.js';
import { WORKER_DEFECT } from '../pg-queue.messages.js';
import { decideOutcome, type OutcomeRules } from './attempt-outcome.js';
import { runAttempt } from './attempt-runner.js';
import type { ClaimLoop } from './claim-loop.js';
import { BatchRun, type HeldJob } from './held-job.js';
import type { WrittenStatus } from './outcome-writer.js';
import type { WorkerState } from './worker-state.js';

/**
 * A worker's jobs from the handler's call to the outcome's answer (running -> settling -> written, or lost): starts
 * a job (or a batch handler's call) in a slot, in the worker's own async context, with its timeout; hands the outcome
 * of an ended attempt to the outcome writer (decideOutcome says what it is); frees the slot; applies the writer's
 * answers; and, at shutdown, waits for the handlers or abandons them. Every end of a job calls the worker's pump().
 */
export class RunningJobs {
  private readonly end = (job: HeldJob, error: unknown, result?: unknown) => this.ended(job, error, result);
  private readonly endBatch = (run: BatchRun, error: unknown) => this.batchEnded(run, error);
  private readonly rules: OutcomeRules;
  /** A bad answer of the queue's backoff function is logged once per worker, not once per failed job. */
  private backoffProblemLogged = false;
  private whenIdle: (() => void)[] = [];
  /**
   * The async context every handler of this worker runs in (startJob, startBatch): the one this worker was made in,
   * at the module's bootstrap, whatever path starts the job. An eager start begins in the enqueuer's call, a claim
   * may be sent from inside another caller's call (a wake-up), a timer from wherever it was set: without this, a
   * handler saw (and could change) the caller's AsyncLocalStorage stores (a request's CLS store, its
   * `@nestjs-cls/transactional` transaction, its active OpenTelemetry context). One runInAsyncScope per start.
   */
  private readonly scope = new AsyncResource('PgQueueWorker');

  constructor(
    private readonly state: WorkerState,
    private readonly claims: ClaimLoop,
    private readonly pump: () => void,
  ) {
    const { config, shared } = state;
    this.rules = { queue: config.queue, backoff: config.options.backoff, maxResultBytes: config.maxResultBytes, logger: shared.logger };
  }

  /**
   * Calls the handler, unless the job is past its start deadline (then false: the caller gives it back). The
   * clock is read here, right before the call, for every job: the starts of one claim or one refill run handlers'
   * synchronous parts one after another, and a handler that blocks (or this process stopped between two starts)
   * must not let the next job start on an earlier reading, when its lease may have lapsed and the job run elsewhere.
   */
  startJob(job: HeldJob): boolean {
    const now = performance.now();
    if (now >= job.startBy) return false;
    this.scope.runInAsyncScope(this.launch, this, job, now);
    return true;
  }

  /** startJob's start, in the worker's async context: the slot, the 'active' event, the timeout's timer, the handler's call. */
  private launch(job: HeldJob, now: number): void {
    const { options, handle } = this.state.config;
    this.begin(job, now);
    // Only jobs with a timeout pay for a timer.
    if (options.timeoutMs !== undefined) {
      const timeoutMs = options.timeoutMs;
      job.timer = setTimeout(() => {
        const error = new JobTimeoutError(timeoutMs);
        job.abort(error);
        this.ended(job, error);
      }, timeoutMs);
    }
    runAttempt(handle, job, this.end);
  }

  /** A job takes its slot and starts (its row says so already: the claim or its start mark), its 'active' event sent. */
  private begin(job: HeldJob, now: number): void {
    job.to('running');
    this.state.slots.running += 1;
    job.startedAt = now;
    if (this.state.shared.events.observed) this.state.tell.emit('active', job, { claimLatencyMs: job.claimLatencyMs });
  }

  /**
   * One call of a batch handler: every job of it running, one call slot taken, one timeout for the call (it aborts
   * every job's signal and fails the jobs not settled on their own).
   */
  startBatch(jobs: HeldJob[]): boolean {
    const now = performance.now();
    if (now >= jobs[0].startBy) return false; // as startJob: the jobs of one claim share their deadline
    this.scope.runInAsyncScope(this.launchBatch, this, jobs, now);
    return true;
  }

  /** startBatch's start, in the worker's async context (as launch). */
  private launchBatch(jobs: HeldJob[], now: number): void {
    const { options, handleBatch } = this.state.config;
    const run = new BatchRun(jobs);
    this.state.slots.runningBatches += 1;
    for (const job of jobs) {
      job.batch = run;
      job.inBatch = true;
      this.begin(job, now);
    }
    if (options.timeoutMs !== undefined) {
      const timeoutMs = options.timeoutMs;
      run.timer = setTimeout(() => {
        const error = new JobTimeoutError(timeoutMs);
        for (const job of jobs) job.abort(error);
        this.batchEnded(run, error);
      }, timeoutMs);
    }
    runAttempt((call: BatchRun) => handleBatch!(call.jobs as HeldJob[]), run, this.endBatch);
  }

  /**
   * A batch handler's call ended (or timed out): each job still running settles on its own, with its own outcome if
   * the handler gave it one (complete, fail, snooze), else the call's: completed if it resolved, failed with its
   * error if it threw. What the call returned is not a job's result (job.complete(result) sets one).
   */
  private batchEnded(run: BatchRun, error: unknown): void {
    clearTimeout(run.timer);
    for (const job of run.jobs) {
      if (job.state !== 'running') continue; // cancelled, lost, or settled by the timeout already
      const mark = job.mark;
      this.ended(job, mark ? mark.error : error, mark?.result);
    }
  }

  /** The handler ended (or timed out): the outcome goes to the writer, the slot frees, the lease is kept until the write lands. */
  private ended(job: HeldJob, error: unknown, result?: unknown): void {
    if (job.state !== 'running') return; // lost, cancelled or given back meanwhile: its answer counts for nothing
    const { state } = this;
    // Inline rather than through guarded(): this runs once per job, and its label names the job.
    try {
      this.freeSlot(job);
      job.to('settling');
      state.slots.settling += 1;
      state.startAhead?.jobFinished(job.endedAt - job.startedAt);
      if (state.buffer.auto) {
        state.buffer.auto.jobFinished(job.endedAt - job.startedAt);
        // A slower sample may leave the buffer holding more than the estimate wants: give the surplus back now,
        // not at the next review, so that idle instances can start it (as the worker did before the redesign).
        const surplus = state.buffer.takeSurplus();
        if (surplus) void state.giveBack(surplus, 'beyond the read-ahead');
      }
      if (job.committed && error === undefined) {
        // A transactional handler: its transaction wrote and committed the completion with the handler's writes.
        job.result = result;
        state.shared.rateLimits?.succeeded(state.config.queue);
        state.shared.outcomes.committed(job, job.committed.flowJobs);
      } else {
        const problem = decideOutcome(job, error, result, this.rules);
        if (problem !== undefined && !this.backoffProblemLogged) {
          this.backoffProblemLogged = true;
          state.shared.logger.error(`${problem} (job ${job.id}; further bad answers of this backoff are not logged)`);
        }
        const sink = state.shared.rateLimits;
        if (job.rateLimited) sink?.rateLimited(state.config.queue, job.rateLimited.ms, job.rateLimited.key, state.config.options.rateLimitedBackoff.maxMs);
        else if (job.failure === undefined && job.snoozeMs === undefined) sink?.succeeded(state.config.queue);
        state.shared.outcomes.write(job);
      }
    } catch (error) {
      state.shared.logger.error(WORKER_DEFECT(state.config.queue, `settling job ${job.id}`, errorLine(error)));
    }
    this.pump();
  }

  /** A job stops holding its slot (ended, lost, cancelled, abandoned). */
  freeSlot(job: HeldJob): void {
    const { state } = this;
    job.endedAt = state.lastFreedAt = performance.now();
    clearTimeout(job.timer);
    state.slots.running -= 1;
    const run = job.batch;
    if (run && --run.live === 0) {
      // The call's last job left: its slot frees (its other jobs settled, or were cancelled or lost before).
      clearTimeout(run.timer);
      state.slots.runningBatches -= 1;
    }
    state.buffer.slotFreed();
    // A freed slot is a reason to claim only where nothing else announces the work it makes claimable: a queue
    // with limits, whose queued jobs wait on the slots and keys that finishing jobs free. A plain queue's claim
    // came back either full (a claim is already asked for) or short, having found every due job; what makes
    // jobs due after it wakes the loop by itself (an insert's NOTIFY, a put-back's or retry()'s, the timer of the
    // next delayed job that each claim reports, this worker's own retry and snooze timers, the poll). Claiming
    // after every job anyway cost a second, empty claim per job at low rates, and a job enqueued while that
    // claim was in flight waited for it to come back before its own claim could go (2% of the latency bench's jobs).
    if (state.limited) this.claims.noteWork();
    if (state.slots.running === 0 && this.whenIdle.length) for (const resolve of this.whenIdle.splice(0)) resolve();
  }

  /** A batch of this worker's outcomes was answered (the outcome writer, through the pool). */
  written(batch: readonly HeldJob[], statusOf: (job: HeldJob) => WrittenStatus): void {
    const { state } = this;
    state.guarded('recording written outcomes', () => {
      for (const job of batch) {
        if (job.state !== 'settling') continue;
        const status = statusOf(job);
        job.to(status === undefined || status === 'dropped' ? 'lost' : 'written');
        state.slots.settling -= 1;
        state.forget(job);
        // dropped: refused for good; its row (marked started before the handler ran) is charged, and its lease lapses.
        if (status === 'dropped') continue;
        const dueInMs = state.tell.written(job, status);
        if (dueInMs !== undefined) this.claims.wakeAt(dueInMs);
      }
      // The rows left `processing` (or are no longer ours): at a limit's capacity, that is a slot this process freed.
      this.claims.slotFreedInDatabase();
    });
    this.pump();
  }

  /** Resolves when no handler is running any more, or after graceMs. */
  async drain(graceMs: number): Promise<void> {
    if (this.state.slots.running === 0) return;
    await withDeadline(new Promise<void>((resolve) => this.whenIdle.push(resolve)), graceMs);
  }

  /** Shutdown past the grace period: abort what still runs and forget it (the caller puts the rows back). */
  abandonAll(): JobRef[] {
    const left: HeldJob[] = [];
    for (const job of this.state.held.values()) if (job.state === 'running') left.push(job);
    for (const job of left) {
      job.abort(new JobAbortedError('worker is shutting down; the job is put back in the queue'));
      this.freeSlot(job);
      job.to('given-back');
      this.state.held.delete(job.id);
    }
    return left;
  }
}
