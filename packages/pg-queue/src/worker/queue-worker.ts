import { AsyncResource } from 'node:async_hooks';
import type { LoggerService } from '@nestjs/common';
import { JobAbortedError, JobTimeoutError } from '../errors/pg-queue.error.js';
import type { JobEvents } from '../events/job-events.js';
import type { Job } from '../interfaces/job.interface.js';
import type { ResolvedHandlerOptions } from '../interfaces/job-handler-options.interface.js';
import { HELD_JOBS_GIVEN_BACK, HELD_JOBS_NOT_GIVEN_BACK, LATE_STARTS, STALE_CLAIM, WORKER_DEFECT } from '../pg-queue.messages.js';
import type { ClaimedJob, JobRef, JobStore } from '../store/job.store.js';
import { errorLine } from '../utils/error-text.js';
import { hasLimits } from '../utils/resolve-options.js';
import { withDeadline, withTimeout } from '../utils/retry-backoff.js';
import { decideOutcome, type OutcomeRules } from './attempt-outcome.js';
import { AttemptReport } from './attempt-report.js';
import { runAttempt } from './attempt-runner.js';
import { ClaimLoop, type ClaimTarget } from './claim-loop.js';
import { BatchRun, HeldJob } from './held-job.js';
import type { JobServices } from './job-attempt.js';
import { bufferLease, JobBuffer } from './job-buffer.js';
import type { BeatLoad } from './lease-keeper.js';
import type { OutcomeWriter, WrittenStatus } from './outcome-writer.js';
import { PUT_BACK_DEADLINE_MS } from './put-back.js';
import type { RowLockLane } from './row-lock-lane.js';
import { StartAhead } from './start-ahead.js';

/** A job may be marked started ahead of a free slot unless this is its last attempt (see startFromBuffer). */
const mayStartAhead = (job: HeldJob) => job.attempt < job.maxAttempts;

/** An eager start's insert (JobStore.insertEagerJob), given the claim it makes: the job's id, and the job if it claimed it. */
type EagerInsert = (claim: { workerId: string; bufferLeaseMs: number; leaseMs: number }) => Promise<{ id: string; job?: ClaimedJob }>;

/** How often a worker reviews its buffer (jobs past their start deadline, 'auto' surplus) while it holds any. */
const BUFFER_REVIEW_MS = 250;
/** A start mark that failed (the database unreachable or busy) is sent again this much later, its jobs still waiting. */
const MARK_RETRY_MS = 100;

export interface QueueWorkerConfig {
  queue: string;
  handlerName: string;
  workerId: string;
  leaseMs: number;
  options: ResolvedHandlerOptions;
  handle: (job: Job) => unknown;
  /** A batch handler's method (options.batch set): called with the jobs of one call. */
  handleBatch?: (jobs: Job[]) => unknown;
  /** The module's maxResultBytes: a larger result fails the attempt for good. */
  maxResultBytes: number;
}

/** What a worker shares with the other queues' workers of its process (the worker pool owns them). */
export interface SharedParts {
  store: JobStore;
  outcomes: OutcomeWriter<HeldJob>;
  lane: RowLockLane;
  logger: LoggerService;
  events: JobEvents;
  /** What a running job's flow and step methods use (job.parents, job.spawn, job.step). */
  services?: JobServices;
  /** The heartbeat: check the buffers now. */
  leases: { checkNow(): void; readonly nextSeq: number };
}

/**
 * One queue's worker: the jobs it holds, one state each (HeldJob), and the one place where they change. Its
 * parts: the claim loop (when and how much to claim), the buffer (jobs read ahead, with their own policy),
 * the attempt runner (calls the handler, reports how it ended), and the outcome writer (shared, batched). No
 * Nest imports, so it runs and tests alone. Claim, run and record are separate steps: no transaction or
 * connection is held while a handler runs.
 *
 * Every input is an event applied as a whole before anything starts: a claim's jobs, an attempt's end, a batch
 * of written outcomes, a heartbeat's answer, a cancel notice, a check request, shutdown. Each ends with one
 * call to pump(), the only place that starts jobs from the buffer and decides whether a claim is worth making.
 * So a heartbeat that finds the leases gone drops every buffered job it names before a freed slot can start
 * one, and no job starts from inside the handling of another's loss.
 *
 * The buffer starts nothing while the worker waits on a check (`unconfirmed`): after a cancel notice, a pause
 * or replace notice, or a failed heartbeat, claim or write, until a heartbeat sent after that has answered.
 */
export class QueueWorker implements ClaimTarget {
  /** Every job held and not finished with, by id: buffered, running or settling. */
  private readonly held = new Map<string, HeldJob>();
  private readonly buffer: JobBuffer;
  private readonly claims: ClaimLoop;
  private running = 0;
  /** Jobs in state `starting`: their slots are taken, their start marks gathered or in flight (see pump). */
  private starting = 0;
  /** Jobs whose start mark waits for the next statement (the one in flight, if any, answers first), in claim order. */
  private marksGathered: HeldJob[] = [];
  /** Jobs in state `armed` (marked ahead of a free slot: StartAhead), in claim order: the next to start. */
  private armed: HeldJob[] = [];
  /** How many jobs to mark ahead of the free slots; undefined for a batch handler (its calls start from claims). */
  private readonly startAhead: StartAhead | undefined;
  /** The start mark in flight (stopClaiming waits for it), and the timer of a failed one's retry. */
  private markInFlight: Promise<void> | undefined;
  private markRetry: NodeJS.Timeout | undefined;
  /** Slots kept for the jobs of the claim in flight that start at once (a batch handler's: for its calls). */
  private reserved = 0;
  /** Slots kept for eager starts in flight: jobs of this process's enqueues inserted already claimed (startEagerly). */
  private eager = 0;
  /** The eager inserts in flight, which stopClaiming waits for (their jobs go back if they come back claimed). */
  private readonly eagerInFlight = new Set<Promise<unknown>>();
  /** A batch handler's calls running now (concurrency counts these, not jobs). */
  private runningBatches = 0;
  private readonly endBatch = (run: BatchRun, error: unknown) => this.batchEnded(run, error);
  /** 'auto': the read-ahead the claim in flight was sized with (ReadAhead.claimed grows its ceiling from it). */
  private readAheadAtClaim = 0;
  /** Outcomes handed to the writer and not answered yet; their leases are still held. */
  private settling = 0;
  private stopping = false;
  /** The buffer may hold jobs taken back: nothing starts from it until a beat numbered this or later answers. */
  private unconfirmedUntilSeq = 0;
  private whenIdle: (() => void)[] = [];
  /** performance.now() when a slot last freed (the review's stall sample). */
  private lastFreedAt = performance.now();
  private reviewTimer: NodeJS.Timeout | undefined;
  private lastReviewAt = 0;
  /** A bad answer of the queue's backoff function is logged once per worker, not once per failed job. */
  private backoffProblemLogged = false;
  private readonly bufferLeaseMs: number;
  private readonly startMarginMs: number;
  /** The queue has limits (globalConcurrency, rateLimit, concurrencyPerKey): see freeSlot. */
  private readonly limited: boolean;
  private readonly end = (job: HeldJob, error: unknown, result?: unknown) => this.ended(job, error, result);
  private readonly tell: AttemptReport;
  private readonly rules: OutcomeRules;
  /**
   * The async context every handler of this worker runs in (startJob, startBatch): the one this worker was made in,
   * at the module's bootstrap, whatever path starts the job. An eager start begins in the enqueuer's call, a claim
   * may be sent from inside another caller's call (a wake-up), a timer from wherever it was set: without this, a
   * handler saw (and could change) the caller's AsyncLocalStorage stores (a request's CLS store, its
   * `@nestjs-cls/transactional` transaction, its active OpenTelemetry context). One runInAsyncScope per start.
   */
  private readonly scope = new AsyncResource('PgQueueWorker');

  constructor(
    private readonly config: QueueWorkerConfig,
    private readonly shared: SharedParts,
  ) {
    const { concurrency, prefetch, globalConcurrency, rateLimit, concurrencyPerKey } = config.options;
    const limited = (this.limited = hasLimits(config.options));
    // resolveHandlerOptions never leaves read-ahead on a queue with limits; the check keeps the two in step.
    this.buffer = new JobBuffer(concurrency, limited ? 0 : prefetch);
    this.startAhead = config.options.batch ? undefined : new StartAhead(concurrency);
    const lease = bufferLease(config.leaseMs);
    this.bufferLeaseMs = lease.leaseMs;
    this.startMarginMs = lease.marginMs;
    this.tell = new AttemptReport(config.queue, config.workerId, shared.logger, shared.events);
    this.rules = { queue: config.queue, backoff: config.options.backoff, maxResultBytes: config.maxResultBytes, logger: shared.logger };
    this.claims = new ClaimLoop(
      {
        queue: config.queue,
        workerId: config.workerId,
        leaseMs: config.leaseMs,
        bufferLeaseMs: lease.leaseMs,
        limits: limited ? { globalConcurrency, rateLimit, concurrencyPerKey } : undefined,
        gatherMs: config.options.batch?.waitMs,
      },
      shared.store,
      this,
      shared.logger,
    );
  }

  get queue(): string {
    return this.config.queue;
  }

  /** Jobs running now (handlers called and not ended). */
  get activeCount(): number {
    return this.running;
  }

  /** Jobs waiting to start: in the buffer, or marked started ahead of a free slot (armed). */
  get bufferedCount(): number {
    return this.buffer.size + this.armed.length;
  }

  /** The claim loop, read by health checks: how long its claim in flight has waited (0: none), and whether it has ended. */
  get claimLoopState(): { claimingForMs: number; ended: boolean } {
    return this.claims.state;
  }

  get observed(): boolean {
    return this.shared.events.observed;
  }

  start(): void {
    if (this.reviewTimer) return;
    this.lastReviewAt = performance.now();
    this.reviewTimer = setInterval(() => this.guarded('reviewing the buffer', () => this.reviewBuffer()), BUFFER_REVIEW_MS).unref();
    this.claims.start();
  }

  /** Look for work now (NOTIFY, poll, reconnect). */
  wake(): void {
    this.claims.wake();
  }

  // ---- The claim loop's side (ClaimTarget) ----

  claimWant(): number {
    if (this.stopping) return 0;
    const { batchSize, concurrency, batch: calls } = this.config.options;
    if (calls) {
      // A batch handler: a full batch for each free call. A call's jobs settle all at once, so the next claim may go
      // while one turn of outcomes is being written (at one call at a time, waiting for them made every claim wait
      // for the previous call's write: 30% fewer jobs/s); not while more than a turn waits.
      if (this.settling > concurrency * calls.size) return 0;
      return Math.max(0, concurrency - this.runningBatches - this.reserved) * calls.size;
    }
    const turn = concurrency + this.buffer.readAhead; // as many jobs as this worker may hold
    // Back-pressure: while a full turn of outcomes waits to be written, claiming more only grows the pile.
    // Unbounded, a slow database let thousands of finished jobs sit in `processing` until their leases ran
    // out and they ran again.
    if (this.settling >= turn) return 0;
    // With prefetch, claims run ahead of free slots so that one round trip brings a whole batch (no-op jobs at
    // concurrency 10 were bound by one claim round trip per 10 jobs); the buffer is topped up only when half a
    // batch fits. With 'auto', the read-ahead and so the batch follow the measured durations (ReadAhead).
    const batch = this.buffer.auto ? Math.min(batchSize, turn) : batchSize;
    const want = Math.min(batch, turn - this.running - this.starting - this.armed.length - this.reserved - this.eager - this.buffer.size);
    return want > 0 && (this.buffer.size === 0 || want >= Math.ceil(batch / 2)) ? want : 0;
  }

  reserveSlots(want: number): { startNow: number; armAhead: number } {
    const calls = this.config.options.batch;
    if (calls) {
      this.reserved += Math.ceil(want / calls.size);
      return { startNow: want, armAhead: 0 }; // every job of the claim starts now, in the calls reserved for it
    }
    const concurrency = this.config.options.concurrency;
    const free = concurrency - this.running - this.starting - this.armed.length - this.reserved - this.eager;
    const startNow = Math.max(0, Math.min(want, free));
    this.reserved += startNow;
    this.readAheadAtClaim = this.buffer.readAhead;
    // Beyond the free slots, the claim itself marks started the jobs StartAhead wants held ahead (no start mark for
    // them later), unless jobs wait in the buffer (they go first, through start marks): those already marked ahead,
    // or on their way to be, count against it.
    const ahead = Math.max(0, this.running + this.starting + this.armed.length + this.reserved + this.eager - concurrency);
    const armAhead = this.buffer.size === 0 ? Math.max(0, Math.min(want - startNow, (this.startAhead?.depth ?? 0) - ahead)) : 0;
    return { startNow, armAhead };
  }

  claimFailed(): void {
    this.reserved = 0;
    this.askForCheck();
    this.pump();
  }

  /**
   * A claim came back: the jobs it started run now, in the slots reserved for them; the rest wait in the buffer
   * until they may start (startBy: the short lease counted from when the claim was sent, less the margin).
   */
  accept(jobs: ClaimedJob[], sentAt: number): void {
    this.guarded('accepting claimed jobs', () => {
      // The claim's first `slots` jobs take the slots reserved for them; the jobs it started beyond them are armed.
      let slots = this.reserved;
      this.reserved = 0;
      const tookMs = performance.now() - sentAt;
      // This process stalled while the claim was in flight (frozen, a blocked event loop): the leases its rows
      // got at the claim may have lapsed meanwhile, and the rows been swept and claimed again elsewhere. None of
      // them starts; all go back, uncharged (fenced: a row claimed again meanwhile is left alone). Seen in the
      // fault suite: a worker SIGSTOPped with a claim in flight started two of its jobs on SIGCONT, 6 s after
      // their 2 s leases had lapsed and another worker had run them.
      if (tookMs > this.config.leaseMs / 2) {
        const late = jobs.map((claimed) => new HeldJob(this.config.queue, claimed, this.shared.services));
        if (late.length) {
          this.shared.logger.warn(STALE_CLAIM(this.config.queue, late.length, Math.round(tookMs), this.config.leaseMs));
          void this.giveBack(late, 'claimed before this process stalled');
        }
        return;
      }
      this.buffer.auto?.claimed(tookMs, this.readAheadAtClaim);
      // The claim's round trip is a start mark's too (it marked the jobs it armed): a sample for StartAhead.
      this.startAhead?.markAnswered(tookMs);
      const startBy = sentAt + this.bufferLeaseMs - this.startMarginMs;
      const runBy = sentAt + this.config.leaseMs / 2;
      const calls = this.config.options.batch;
      const batched: HeldJob[] = [];
      const late: HeldJob[] = [];
      for (const claimed of jobs) {
        const job = new HeldJob(this.config.queue, claimed, this.shared.services);
        // An older claim of this job still in our books: this process stalled past its lease (frozen, a blocked
        // event loop), the sweeper put the job back and we claimed it again before a heartbeat could tell us.
        // That claim is lost; retire it now, or its late answers would free this claim's slot and lease.
        const stale = this.held.get(job.id);
        if (stale) this.lose(stale);
        this.held.set(job.id, job);
        if (claimed.buffered) {
          job.to('buffered');
          job.startBy = startBy;
          this.buffer.add(job);
        } else {
          job.startBy = runBy;
          if (calls) batched.push(job);
          else if (slots <= 0) {
            job.to('armed');
            this.armed.push(job);
          } else {
            slots -= 1;
            if (!this.startJob(job)) late.push(job);
          }
        }
      }
      for (let i = 0; calls && i < batched.length; i += calls.size) {
        const call = batched.slice(i, i + calls.size);
        if (!this.startBatch(call)) late.push(...call);
      }
      if (late.length) {
        this.shared.logger.warn(LATE_STARTS(this.config.queue, late.length, Math.round(performance.now() - sentAt), this.config.leaseMs));
        void this.giveBack(late, 'not started in time: this process stalled while starting the jobs of its claim');
      }
    });
    this.pump();
  }

  // ---- Eager start: a job of this process's enqueue, inserted already claimed ----

  /**
   * Whether an enqueue of this process may insert its job already claimed by this worker (QueueService.enqueue):
   * a slot is free now and nothing waits in the buffer (buffered jobs go first), the queue has no limits across
   * instances (their claims take turns under a lock) and is not a batch handler's, and the worker is not
   * stopping. The statement still decides whether it claims (insertEagerJob: not paused, nothing due before it).
   */
  get eagerSlotFree(): boolean {
    const { eagerStart, concurrency } = this.config.options;
    return eagerStart && !this.stopping && this.buffer.size === 0 && this.armed.length === 0 && this.running + this.starting + this.reserved + this.eager < concurrency && this.settling < concurrency + this.buffer.readAhead;
  }

  /**
   * Runs the insert of an eager start in a slot kept for it (check eagerSlotFree first): a job it comes back
   * claimed with starts at once, as a claimed job would; one that went in queued leaves the slot to the claim
   * loop (the trigger's NOTIFY wakes it). Returns the job's id; an insert that fails frees the slot and throws.
   */
  startEagerly(insert: EagerInsert): Promise<string> {
    this.eager += 1;
    const run = this.runEager(insert);
    this.eagerInFlight.add(run);
    const forget = () => void this.eagerInFlight.delete(run);
    run.then(forget, forget);
    return run;
  }

  private async runEager(insert: EagerInsert): Promise<string> {
    const sentAt = performance.now();
    let result: { id: string; job?: ClaimedJob };
    try {
      // Claimed started (charged, the full lease), or on its last attempt as a read-ahead claim is (buffered, uncharged,
      // the short lease), to start through the start mark: see insertEagerJob.
      result = await insert({ workerId: this.config.workerId, bufferLeaseMs: this.bufferLeaseMs, leaseMs: this.config.leaseMs });
    } finally {
      this.eager -= 1;
    }
    if (result.job) await this.acceptEager(result.job, sentAt);
    else this.pump();
    return result.id;
  }

  /**
   * The eager insert came back claimed (buffered, uncharged): the job takes its slot and starts once its start mark
   * lands (as a job from the buffer), unless the worker is stopping or stalled meanwhile (then it goes back).
   */
  private acceptEager(claimed: ClaimedJob, sentAt: number): Promise<void> | undefined {
    let givenBack: Promise<void> | undefined;
    this.guarded('starting an eagerly claimed job', () => {
      const job = new HeldJob(this.config.queue, claimed, this.shared.services);
      // As for a claim's jobs (accept): a buffered one's mark goes only in the first half of its short lease; a started
      // one starts in the first half of its lease (its slot was kept for it; armed if jobs marked ahead came first).
      job.startBy = claimed.buffered ? sentAt + this.bufferLeaseMs - this.startMarginMs : sentAt + this.config.leaseMs / 2;
      if (!this.stopping) {
        this.held.set(job.id, job);
        if (performance.now() < job.startBy) {
          if (claimed.buffered) {
            this.gatherMark(job);
            this.sendMarks();
          } else if (this.armed.length > 0 || this.running + this.starting + this.reserved + this.eager >= this.config.options.concurrency) {
            job.to('armed');
            this.armed.push(job);
          } else if (!this.startJob(job)) {
            this.held.delete(job.id);
            givenBack = this.giveBack([job], 'claimed at enqueue, not started in time');
          }
          return;
        }
        this.shared.logger.warn(STALE_CLAIM(this.config.queue, 1, Math.round(performance.now() - sentAt), this.config.leaseMs));
      }
      givenBack = this.giveBack([job], this.stopping ? 'claimed at enqueue while shutting down' : 'claimed at enqueue before this process stalled');
    });
    this.pump();
    return givenBack;
  }

  // ---- Running an attempt ----

  /**
   * Calls the handler, unless the job is past its start deadline (then false: the caller gives it back). The
   * clock is read here, right before the call, for every job: the starts of one claim or one refill run handlers'
   * synchronous parts one after another, and a handler that blocks (or this process stopped between two starts)
   * must not let the next job start on an earlier reading, when its lease may have lapsed and the job run elsewhere.
   */
  private startJob(job: HeldJob): boolean {
    const now = performance.now();
    if (now >= job.startBy) return false;
    this.scope.runInAsyncScope(this.launch, this, job, now);
    return true;
  }

  /** startJob's start, in the worker's async context: the slot, the 'active' event, the timeout's timer, the handler's call. */
  private launch(job: HeldJob, now: number): void {
    const { options, handle } = this.config;
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
    this.running += 1;
    job.startedAt = now;
    if (this.shared.events.observed) this.tell.emit('active', job, { claimLatencyMs: job.claimLatencyMs });
  }

  /**
   * One call of a batch handler: every job of it running, one call slot taken, one timeout for the call (it aborts
   * every job's signal and fails the jobs not settled on their own).
   */
  private startBatch(jobs: HeldJob[]): boolean {
    const now = performance.now();
    if (now >= jobs[0].startBy) return false; // as startJob: the jobs of one claim share their deadline
    this.scope.runInAsyncScope(this.launchBatch, this, jobs, now);
    return true;
  }

  /** startBatch's start, in the worker's async context (as launch). */
  private launchBatch(jobs: HeldJob[], now: number): void {
    const { options, handleBatch } = this.config;
    const run = new BatchRun(jobs);
    this.runningBatches += 1;
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
    // Inline rather than through guarded(): this runs once per job, and its label names the job.
    try {
      this.freeSlot(job);
      job.to('settling');
      this.settling += 1;
      this.startAhead?.jobFinished(job.endedAt - job.startedAt);
      if (this.buffer.auto) {
        this.buffer.auto.jobFinished(job.endedAt - job.startedAt);
        // A slower sample may leave the buffer holding more than the estimate wants: give the surplus back now,
        // not at the next review, so that idle instances can start it (as the worker did before the redesign).
        const surplus = this.buffer.takeSurplus();
        if (surplus) void this.giveBack(surplus, 'beyond the read-ahead');
      }
      if (job.committed && error === undefined) {
        // A transactional handler: its transaction wrote and committed the completion with the handler's writes.
        job.result = result;
        this.shared.outcomes.committed(job, job.committed.flowJobs);
      } else {
        const problem = decideOutcome(job, error, result, this.rules);
        if (problem !== undefined && !this.backoffProblemLogged) {
          this.backoffProblemLogged = true;
          this.shared.logger.error(`${problem} (job ${job.id}; further bad answers of this backoff are not logged)`);
        }
        this.shared.outcomes.write(job);
      }
    } catch (error) {
      this.shared.logger.error(WORKER_DEFECT(this.config.queue, `settling job ${job.id}`, errorLine(error)));
    }
    this.pump();
  }

  /** A job stops holding its slot (ended, lost, cancelled, abandoned). */
  private freeSlot(job: HeldJob): void {
    job.endedAt = this.lastFreedAt = performance.now();
    clearTimeout(job.timer);
    this.running -= 1;
    const run = job.batch;
    if (run && --run.live === 0) {
      // The call's last job left: its slot frees (its other jobs settled, or were cancelled or lost before).
      clearTimeout(run.timer);
      this.runningBatches -= 1;
    }
    this.buffer.slotFreed();
    // A freed slot is a reason to claim only where nothing else announces the work it makes claimable: a queue
    // with limits, whose queued jobs wait on the slots and keys that finishing jobs free. A plain queue's claim
    // came back either full (a claim is already asked for) or short, having found every due job; what makes
    // jobs due after it wakes the loop by itself (an insert's NOTIFY, a put-back's or retry()'s, the timer of the
    // next delayed job that each claim reports, this worker's own retry and snooze timers, the poll). Claiming
    // after every job anyway cost a second, empty claim per job at low rates, and a job enqueued while that
    // claim was in flight waited for it to come back before its own claim could go (2% of the latency bench's jobs).
    if (this.limited) this.claims.noteWork();
    if (this.running === 0 && this.whenIdle.length) for (const resolve of this.whenIdle.splice(0)) resolve();
  }

  // ---- Answers from the database ----

  /** A batch of this worker's outcomes was answered (the outcome writer, through the pool). */
  written(batch: readonly HeldJob[], statusOf: (job: HeldJob) => WrittenStatus): void {
    this.guarded('recording written outcomes', () => {
      for (const job of batch) {
        if (job.state !== 'settling') continue;
        const status = statusOf(job);
        job.to(status === undefined || status === 'dropped' ? 'lost' : 'written');
        this.settling -= 1;
        if (this.held.get(job.id) === job) this.held.delete(job.id);
        // dropped: refused for good; its row (marked started before the handler ran) is charged, and its lease lapses.
        if (status === 'dropped') continue;
        const dueInMs = this.tell.written(job, status);
        if (dueInMs !== undefined) this.claims.wakeAt(dueInMs);
      }
      // The rows left `processing` (or are no longer ours): at a limit's capacity, that is a slot this process freed.
      this.claims.slotFreedInDatabase();
    });
    this.pump();
  }

  /**
   * Adds this worker's jobs to a heartbeat's load (see LeaseHolders.collect). A job in state `starting` is in neither
   * list: its start mark is its check, and no other statement of this process touches its row meanwhile (see pump).
   * An `armed` one is a started one to the beat (its row says so): renewed, and dropped if the row is no longer ours.
   */
  collect(full: boolean, load: BeatLoad): void {
    if (!full && this.unconfirmedUntilSeq === 0) return;
    for (const job of this.held.values()) {
      if (job.state === 'buffered') load.buffered.push(job);
      else if (full && job.state !== 'starting') load.started.push(job);
    }
  }

  /**
   * A heartbeat answered: every job it sent that `kept` lacks is no longer ours, applied to all of them before
   * anything starts. Running ones are aborted (their outcome would be fenced out anyway); buffered ones are
   * dropped. A job sent as buffered that moved on meanwhile is judged by its start mark, not by this beat (the mark
   * may have landed first, and the beat then found the row no longer buffered). A settling job's outcome is left to
   * the writer, which hears the same from the database. A transactional handler's job whose completion its own
   * transaction wrote is not lost either: the beat waited on that transaction's row lock and saw it commit; the
   * attempt ends as completed (its event, metrics and the flows' second look), from its own answer.
   */
  beatAnswered(load: BeatLoad, kept: Set<string>, seq: number): void {
    this.guarded('applying a heartbeat', () => {
      for (const job of load.started) {
        if (this.held.get(job.id) !== job || kept.has(job.id)) continue; // kept, another queue's, or finished with meanwhile
        if ((job.state === 'running' && !job.settledInTransaction) || job.state === 'armed') this.lose(job);
      }
      for (const job of load.buffered) {
        if (this.held.get(job.id) !== job || kept.has(job.id)) continue;
        if (job.state === 'buffered') this.lose(job);
      }
      if (this.unconfirmedUntilSeq > 0 && seq >= this.unconfirmedUntilSeq) this.unconfirmedUntilSeq = 0;
    });
    this.pump();
  }

  /** The job's row is no longer this claim's: retire it wherever it stands. */
  private lose(job: HeldJob): void {
    if (this.held.get(job.id) === job) this.held.delete(job.id);
    if (job.state === 'buffered') {
      this.buffer.remove(job);
      job.to('lost');
    } else if (job.state === 'starting') {
      this.unstart(job);
      job.to('lost');
    } else if (job.state === 'armed') {
      this.disarm(job);
      job.to('lost');
    } else if (job.state === 'running' && job.batch) {
      // A batch handler's call that lost one job's lease settles none of its jobs: the others' leases lapse, and
      // the sweeper puts them back for another attempt (the call ran them, or part of them).
      for (const other of job.batch.jobs) if (other.state === 'running') this.loseRunning(other);
    } else if (job.state === 'running') {
      this.loseRunning(job);
    }
    // settling: its outcome is with the writer, which hears from the database that the row is gone.
  }

  /** A running job is no longer this claim's: its signal aborted, its slot freed, its outcome never written. */
  private loseRunning(job: HeldJob): void {
    if (this.held.get(job.id) === job) this.held.delete(job.id);
    const reason = new JobAbortedError('lease lost: the job was taken back (swept, cancelled) while running');
    job.abort(reason);
    this.shared.logger.warn(`job ${job.id} (${this.config.queue}, attempt ${job.attempt}) lost its lease while running; its outcome will be discarded`);
    this.freeSlot(job);
    job.to('lost');
    this.tell.emit('lease-lost', job, { error: reason });
  }

  /**
   * A cancel notice: the job's row was cancelled (that claim of it, `token`; undefined: whichever). A buffered
   * copy is dropped; a running one is aborted. A cancel seldom comes alone (a bulk cancel sends one notice per
   * job, and they may arrive in several reads), so the rest of the buffer waits for a check before it starts.
   */
  cancelled(jobId: string, token: string | undefined, reason: Error): boolean {
    const job = this.held.get(jobId);
    if (!job || (token !== undefined && job.token !== token)) return false;
    let told = false;
    this.guarded(`cancelling job ${jobId}`, () => {
      if (job.state === 'buffered') {
        this.held.delete(job.id);
        this.buffer.remove(job);
        job.to('cancelled');
      } else if (job.state === 'starting') {
        // Its mark is refused (the row is cancelled) or was taken before the cancel, which then cancelled a started
        // job's row: either way it must not start now.
        this.held.delete(job.id);
        this.unstart(job);
        job.to('cancelled');
      } else if (job.state === 'armed') {
        // Marked ahead, its handler never called: the cancel took a row that said started, and it never starts.
        this.held.delete(job.id);
        this.disarm(job);
        job.to('cancelled');
      } else if (job.state === 'running') {
        this.held.delete(job.id);
        job.abort(reason);
        this.freeSlot(job);
        job.to('cancelled');
        this.tell.emit('cancelled', job, { error: reason });
        told = true;
      }
      this.askForCheck();
    });
    this.pump();
    return told;
  }

  /** Jobs of this queue may have been paused or rewritten where they sit in buffers: check ours before starting any. */
  checkBuffer(): void {
    this.askForCheck();
    this.pump();
  }

  private askForCheck(): void {
    if (this.buffer.size === 0) return;
    this.distrust();
    this.shared.leases.checkNow();
  }

  /**
   * A heartbeat failed: until one answers (the heartbeat retries on its own), nothing starts from the buffer.
   * A failed claim or write asks for a check instead (askForCheck): the same wait, and a beat at once.
   */
  distrust(): void {
    if (this.buffer.size === 0) return;
    this.unconfirmedUntilSeq = this.shared.leases.nextSeq;
  }

  // ---- Filling slots, and the buffer's review ----

  /**
   * The one place that starts jobs from the buffer: free slots are filled with jobs that may still start
   * (unless stopping, or waiting on a check); those past their start deadline on the way go back to the queue.
   *
   * A job from the buffer starts only once its row says so (issue 39): it takes its slot in state `starting`, and one
   * start mark (JobStore.markStarted: fenced by this worker and the claim's fence token, charged, `buffered = false`,
   * the full lease) goes for every job gathered; while it is in flight, further starts gather for the next. On its
   * answer the jobs it marked start in claim order (their start deadline checked again), and those it refused (the row
   * cancelled, replaced, paused, swept meanwhile) are lost, never started. So whatever reads "not started" in the
   * database (buffered: a bulk or flow cancel, onConflict 'replace', the sweeper's uncharged put-back) is true.
   * The mark runs outside the RowLockLane: the rows it locks are its `starting` jobs only, which no heartbeat (collect
   * leaves them out), outcome batch (they have no outcome) or put-back (they are out of the buffer) of this process
   * touches while it is in flight; against other sessions it locks its rows in id order, as a bulk cancel and a
   * flow's cancel do. In the lane it would wait behind every outcome batch, and each start with it.
   *
   * Then the claim loop is roused if a claim is worth making (not after every job: that cost a promise and a
   * loop turn per job); it claims if there may be work (a slot freed since its last claim, a NOTIFY, the poll).
   */
  private pump(): void {
    // Inline rather than through guarded(): this runs after every job, and a closure a call was measurable.
    try {
      // Armed jobs' rows say started already: what a check would confirm (a cancel, a pause or replace of buffered
      // rows) does not touch them, and their leases are the full ones, so they start while a check is pending.
      if (!this.stopping && this.armed.length > 0) this.startArmed();
      if (!this.stopping && this.unconfirmedUntilSeq === 0 && this.buffer.size > 0) this.startFromBuffer();
      if (this.marksGathered.length > 0) this.sendMarks();
    } catch (error) {
      this.shared.logger.error(WORKER_DEFECT(this.config.queue, 'starting buffered jobs', errorLine(error)));
    }
    if (!this.stopping && this.claimWant() > 0) this.claims.rouse();
  }

  /** Armed jobs (marked already) take the free slots first, in claim order. */
  private startArmed(): void {
    const concurrency = this.config.options.concurrency;
    let late: HeldJob[] | undefined;
    while (this.armed.length > 0 && this.running + this.reserved + this.eager < concurrency) {
      const job = this.armed.shift()!;
      if (!this.startJob(job)) (late ??= []).push(job);
    }
    if (late) void this.giveBack(late, 'marked started, not started in time');
  }

  /**
   * Start marks for the jobs that take the free slots, then for up to StartAhead's depth more (armed when they
   * land). A job on its last attempt is never marked ahead of a free slot (a death of this process would then
   * dead-letter a job that never ran): the jobs behind it wait for it.
   */
  private startFromBuffer(): void {
    const concurrency = this.config.options.concurrency;
    const now = performance.now();
    const expired: HeldJob[] = [];
    const depth = this.startAhead?.depth ?? 0;
    for (;;) {
      const ahead = this.running + this.starting + this.armed.length + this.reserved + this.eager - concurrency;
      if (ahead >= depth) break;
      const job = this.buffer.next(now, expired, ahead >= 0 ? mayStartAhead : undefined);
      if (!job) break;
      this.gatherMark(job);
    }
    if (expired.length) void this.giveBack(expired, 'past their start deadline');
  }

  /** A job takes its slot in state `starting`; its start mark goes with the next statement (sendMarks). */
  private gatherMark(job: HeldJob): void {
    job.to('starting');
    this.starting += 1;
    this.marksGathered.push(job);
  }

  /** An `armed` job leaves (cancelled, lost) before its start. */
  private disarm(job: HeldJob): void {
    const i = this.armed.indexOf(job);
    if (i >= 0) this.armed.splice(i, 1);
  }

  /** A `starting` job leaves (cancelled, lost): its slot frees, and its mark is not sent if it was still waiting. */
  private unstart(job: HeldJob): void {
    this.starting -= 1;
    const i = this.marksGathered.indexOf(job);
    if (i >= 0) this.marksGathered.splice(i, 1);
    this.buffer.slotFreed();
  }

  /**
   * Sends one start mark for every job gathered, unless one is in flight (its answer sends the next) or stopping. Sent
   * from a microtask: the slots that free in one turn of the event loop (the jobs of one start, ending together)
   * gather into one mark. Sent at once, the first freed slot's mark went alone and the others waited for it: marks
   * of half the slots each, half the starts per round trip with no-op jobs.
   */
  private sendMarks(): void {
    if (this.markInFlight || this.markRetry || this.stopping || this.marksGathered.length === 0) return;
    this.markInFlight = new Promise<void>((resolve) => queueMicrotask(() => resolve(this.flushMarks())));
  }

  private flushMarks(): Promise<void> | undefined {
    if (this.stopping || this.marksGathered.length === 0) {
      this.markInFlight = undefined;
      return undefined; // stopping: stopClaiming gives back the jobs gathered
    }
    const batch = this.marksGathered;
    this.marksGathered = [];
    const sentAt = performance.now();
    const { workerId, leaseMs } = this.config;
    return this.shared.store.markStarted(workerId, leaseMs, batch).then(
      (marked) => this.marked(batch, marked, sentAt),
      (error: unknown) => this.markFailed(batch, error),
    );
  }

  /**
   * A start mark answered: the jobs it marked start, in claim order, while slots are free; the rest are `armed` (marked
   * ahead: they start as slots free, see startFromBuffer). The ones it refused are no longer ours.
   */
  private marked(batch: HeldJob[], marked: Set<string>, sentAt: number): void {
    this.markInFlight = undefined;
    const now = performance.now();
    this.startAhead?.markAnswered(now - sentAt);
    this.guarded('starting marked jobs', () => {
      // As for a claim's jobs (accept): the row's full lease counts from the mark; start in its first half.
      const runBy = sentAt + this.config.leaseMs / 2;
      const late: HeldJob[] = [];
      const concurrency = this.config.options.concurrency;
      for (const job of batch) {
        if (job.state !== 'starting') continue; // cancelled or lost while its mark was on its way: its slot is free already
        this.starting -= 1;
        if (!marked.has(job.id)) {
          if (this.held.get(job.id) === job) this.held.delete(job.id);
          job.to('lost');
          this.buffer.slotFreed();
          continue;
        }
        job.startBy = runBy;
        if (this.stopping) late.push(job);
        else if (this.armed.length > 0 || this.running + this.reserved + this.eager >= concurrency) {
          job.to('armed');
          this.armed.push(job);
        } else if (!this.startJob(job)) late.push(job);
      }
      if (late.length) {
        if (!this.stopping) this.shared.logger.warn(LATE_STARTS(this.config.queue, late.length, Math.round(performance.now() - sentAt), this.config.leaseMs));
        void this.giveBack(late, this.stopping ? 'shutting down' : 'not started in time: this process stalled while starting them');
      }
    });
    this.pump();
  }

  /**
   * A start mark failed (the database unreachable or busy; it wrote nothing, or its answer was lost after it landed):
   * its jobs keep their slots and are marked again shortly, first in line. The mark is fenced by the claim, so a row
   * taken back meanwhile (the short lease lapsed, then swept) is refused then, and never started.
   */
  private markFailed(batch: HeldJob[], error: unknown): void {
    this.markInFlight = undefined;
    const waiting = batch.filter((job) => job.state === 'starting');
    if (waiting.length === 0) return this.pump();
    this.shared.logger.warn(`queue "${this.config.queue}": the start mark of ${waiting.length} job(s) failed (${errorLine(error)}); trying again`);
    this.marksGathered.unshift(...waiting);
    this.markRetry = setTimeout(() => {
      this.markRetry = undefined;
      this.sendMarks();
    }, MARK_RETRY_MS);
  }

  /**
   * Every BUFFER_REVIEW_MS: gives back buffered jobs past their start deadline, and with 'auto' the surplus of
   * jobs running far longer than the estimate (a burst of slow jobs, a handler stuck): seen before any of them
   * finishes, by how long no slot has freed while all are busy. A tick that comes late means this process
   * itself was stalled (a blocked event loop, the machine busy): its stall sample says nothing about the jobs.
   */
  private reviewBuffer(): void {
    const now = performance.now();
    const late = now - this.lastReviewAt > 2 * BUFFER_REVIEW_MS;
    this.lastReviewAt = now;
    if (this.stopping) return;
    const busy = this.running + this.starting >= this.config.options.concurrency;
    if (this.armed.length > 0) {
      // A stall is a sample (StartAhead.stalled): jobs turned slow or stuck stop being armed. Armed jobs no slot freed
      // for in time go back, uncharged again. Not those beyond a depth that shrank: they are the next in claim order,
      // ahead of every buffered job, and giving them back let the buffer's later (lower-priority) jobs start first.
      if (busy && !late) this.startAhead?.stalled(now - this.lastFreedAt);
      const out = this.armed.filter((job) => now >= job.startBy);
      if (out.length) {
        for (const job of out) this.disarm(job);
        void this.giveBack(out, 'marked started ahead, no slot freed in time');
      }
    }
    if (this.buffer.size === 0) return;
    const out = this.buffer.review(now, busy && !late ? now - this.lastFreedAt : 0);
    if (out.length) this.giveBack(out, 'held too long or beyond the read-ahead');
    this.pump();
  }

  /**
   * Puts buffered jobs (already out of the buffer) back in the queue at once, uncharged, for any instance to
   * take: in the lane, since heartbeats lock the same rows. If the database does not take them, their short
   * leases lapse and the sweeper puts them back, uncharged too.
   */
  private giveBack(jobs: HeldJob[], why: string): Promise<void> {
    for (const job of jobs) {
      job.to('given-back');
      if (this.held.get(job.id) === job) this.held.delete(job.id);
    }
    const { queue, workerId } = this.config;
    const { logger, lane, store } = this.shared;
    return lane.run(() => withTimeout(store.releaseJobs(workerId, jobs), PUT_BACK_DEADLINE_MS, 'putting jobs back')).then(
      () => logger.debug?.(HELD_JOBS_GIVEN_BACK(queue, jobs.length, why)),
      (error: unknown) => logger.warn(HELD_JOBS_NOT_GIVEN_BACK(queue, jobs.length, errorLine(error))),
    );
  }

  // ---- Shutdown ----

  /** Stops claiming, then puts the buffer back at once (before the drain of running jobs). */
  async stopClaiming(): Promise<void> {
    this.stopping = true;
    clearInterval(this.reviewTimer);
    await this.claims.stop();
    // An eager insert in flight comes back to a stopping worker: its job goes back at once (acceptEager).
    await Promise.allSettled(this.eagerInFlight);
    // A start mark in flight: its jobs go back when it answers (marked); those still waiting for one go back now.
    while (this.markInFlight) await this.markInFlight;
    clearTimeout(this.markRetry);
    this.markRetry = undefined;
    const waiting = this.marksGathered.splice(0).filter((job) => job.state === 'starting');
    this.starting -= waiting.length;
    // Armed jobs go back uncharged (releaseJobs takes back the attempt of a row that says started).
    const buffered = [...this.armed.splice(0), ...waiting, ...this.buffer.takeAll()];
    if (buffered.length) await this.giveBack(buffered, 'shutting down');
  }

  /** Resolves when no handler is running any more, or after graceMs. */
  async drain(graceMs: number): Promise<void> {
    if (this.running === 0) return;
    await withDeadline(new Promise<void>((resolve) => this.whenIdle.push(resolve)), graceMs);
  }

  /** Shutdown past the grace period: abort what still runs and forget it (the caller puts the rows back). */
  abandonAll(): JobRef[] {
    const left: HeldJob[] = [];
    for (const job of this.held.values()) if (job.state === 'running') left.push(job);
    for (const job of left) {
      job.abort(new JobAbortedError('worker is shutting down; the job is put back in the queue'));
      this.freeSlot(job);
      job.to('given-back');
      this.held.delete(job.id);
    }
    return left;
  }

  // ---- Plumbing ----

  /** Runs a step of the worker; a defect in it is logged with its context, never thrown into the host's event loop. */
  private guarded(what: string, step: () => void): void {
    try {
      step();
    } catch (error) {
      this.shared.logger.error(WORKER_DEFECT(this.config.queue, what, errorLine(error)));
    }
  }
}
