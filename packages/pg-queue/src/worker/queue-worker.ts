import type { JobRef, ClaimedJob } from '../store/job.store.js';
import { LATE_STARTS, LIMITED_NOT_MARKED, STALE_CLAIM, WORKER_DEFECT } from '../pg-queue.messages.js';
import type { EffectiveLimits } from '../limits/queue-limits.js';
import type { ResolvedFairness } from '../interfaces/job-handler-options.interface.js';
import type { ClaimLimits } from '../store/job-store.types.js';
import { hasLimits, refusesReadAhead } from '../utils/resolve-options.js';
import { errorLine } from '../utils/error-text.js';
import { ClaimLoop, type ClaimLoopState, type ClaimTarget } from './claim-loop.js';
import { EagerStarts, type EagerInsert } from './eager-starts.js';
import { HeldJob } from './held-job.js';
import { LeaseAnswers } from './lease-answers.js';
import type { BeatLoad } from './lease-keeper.js';
import type { WrittenStatus } from './outcome-writer.js';
import { RunningJobs } from './running-jobs.js';
import { StartMarks } from './start-marks.js';
import { armedGoingBack, mayStartAhead, placeClaimed, stalledFor } from './start-plan.js';
import { WorkerState, type QueueWorkerConfig, type SharedParts } from './worker-state.js';

export type { QueueWorkerConfig, SharedParts } from './worker-state.js';

/** How often a worker reviews its buffer (jobs past their start deadline, 'auto' surplus) while it holds any. */
const BUFFER_REVIEW_MS = 250;

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
 *
 * This file wires the events to the parts that apply them, each in its own file, over one WorkerState (jobs held,
 * buffer, armed list, slots): a claim's answer (accept) and the buffer's starts and review (pump), here; the start
 * mark (StartMarks), run and settle (RunningJobs), heartbeats, cancels and losses (LeaseAnswers), eager starts
 * (EagerStarts). Their decisions from the counts are pure code in start-plan.ts; a held job's states, in held-job.ts.
 */
export class QueueWorker implements ClaimTarget {
  private readonly state: WorkerState;
  private readonly claims: ClaimLoop;
  private readonly runs: RunningJobs;
  private readonly marks: StartMarks;
  private readonly answers: LeaseAnswers;
  private readonly eager: EagerStarts;
  /** 'auto': the read-ahead the claim in flight was sized with (ReadAhead.claimed grows its ceiling from it). */
  private readAheadAtClaim = 0;
  /** state.reviews when the claim in flight was sent (one at a time): a review asked since sends its jobs back. */
  private reviewsAtClaim = 0;
  private reviewTimer: NodeJS.Timeout | undefined;
  private lastReviewAt = 0;

  constructor(config: QueueWorkerConfig, shared: SharedParts) {
    const state = (this.state = new WorkerState(config, shared));
    const { globalConcurrency, rateLimit, concurrencyPerKey, fairness } = config.options;
    this.claims = new ClaimLoop(
      {
        queue: config.queue,
        workerId: config.workerId,
        leaseMs: config.leaseMs,
        bufferLeaseMs: state.deadlines.bufferLeaseMs,
        limits: state.limited ? claimLimits({ globalConcurrency, rateLimit, concurrencyPerKey }, fairness) : undefined,
        gatherMs: config.options.batch?.waitMs,
        order: config.options.lifo ? 'lifo' : 'fifo',
      },
      shared.store,
      this,
      shared.logger,
    );
    const pump = () => this.pump();
    this.runs = new RunningJobs(state, this.claims, pump);
    this.marks = new StartMarks(state, this.runs, pump, () => this.answers.askForCheck()); // answers exists by then
    this.answers = new LeaseAnswers(state, this.runs, this.marks, pump);
    this.eager = new EagerStarts(state, this.runs, this.marks, pump);
  }

  get queue(): string {
    return this.state.config.queue;
  }

  /** Jobs running now (handlers called and not ended). */
  get activeCount(): number {
    return this.state.slots.running;
  }

  /** Jobs waiting to start: in the buffer, or marked started ahead of a free slot (armed). */
  get bufferedCount(): number {
    return this.state.buffer.size + this.state.armed.length;
  }

  /** The claim loop, for health checks, and the slots with no job in them (a claim in flight reserves, fills none). */
  get claimLoopState(): ClaimLoopState & { idleSlots: number } {
    return { ...this.claims.state, idleSlots: this.state.slots.idle(this.state.armed.length) };
  }

  get observed(): boolean {
    return this.state.shared.events.observed;
  }

  get storedLimits(): string | null {
    return this.state.storedLimits;
  }

  start(): void {
    if (this.reviewTimer) return;
    this.lastReviewAt = performance.now();
    this.reviewTimer = setInterval(() => this.state.guarded('reviewing the buffer', () => this.reviewBuffer()), BUFFER_REVIEW_MS).unref();
    this.claims.start();
  }

  /** Look for work now (NOTIFY, poll, reconnect). */
  wake(): void {
    this.claims.wake();
  }

  // ---- The claim loop's side (ClaimTarget): how much to claim (Slots.claimWant, reserve), and its answer ----

  claimWant(): number {
    const { state } = this;
    if (state.stopping) return 0;
    const buffer = state.buffer;
    return state.slots.claimWant(state.armed.length, buffer.size, buffer.readAhead, buffer.auto !== undefined);
  }

  reserveSlots(want: number): { startNow: number; armAhead: number } {
    const { state } = this;
    if (!state.config.options.batch) this.readAheadAtClaim = state.buffer.readAhead;
    this.reviewsAtClaim = state.reviews;
    // A LIFO queue keeps its jobs in claim order across claims (start-plan.ts, reserve): the newest first, held ahead or not.
    return state.slots.reserve(want, state.armed.length, state.buffer.size, state.startAhead?.depth ?? 0, this.claims.order !== 'fifo');
  }

  claimFailed(): void {
    this.state.slots.reserved = 0;
    this.answers.askForCheck();
    this.pump();
  }

  /**
   * A claim came back: the jobs it started run now, in the slots reserved for them; the rest wait in the buffer
   * until they may start (startBy: the short lease counted from when the claim was sent, less the margin).
   */
  accept(jobs: ClaimedJob[], sentAt: number): void {
    const { state } = this;
    const { config, shared, slots, deadlines } = state;
    state.guarded('accepting claimed jobs', () => {
      // The claim's first `slots` jobs take the slots reserved for them; the jobs it started beyond them are armed.
      let slotsLeft = slots.reserved;
      slots.reserved = 0;
      const tookMs = performance.now() - sentAt;
      // This process stalled while the claim was in flight (frozen, a blocked event loop): its rows' leases may have
      // lapsed and the rows been swept and claimed elsewhere. None starts; all go back, uncharged (fenced). The fault
      // suite saw a worker SIGSTOPped mid-claim start two jobs on SIGCONT, 6 s after their 2 s leases, already run.
      if (deadlines.stale(tookMs)) {
        const late = jobs.map((claimed) => new HeldJob(config.queue, claimed, shared.services));
        if (late.length) {
          shared.logger.warn(STALE_CLAIM(config.queue, late.length, Math.round(tookMs), config.leaseMs));
          void state.giveBack(late, 'claimed before this process stalled');
        }
        return;
      }
      // A pause asked (here, or heard) while the claim was in flight: it may have taken its jobs just before the pause
      // committed. None starts (once pause() returns in this process, nothing it held starts); all go back, uncharged.
      if (state.reviews !== this.reviewsAtClaim) {
        const back = jobs.map((claimed) => new HeldJob(config.queue, claimed, shared.services));
        if (back.length) void state.giveBack(back, 'claimed while its queue was being paused');
        return;
      }
      state.buffer.auto?.claimed(tookMs, this.readAheadAtClaim);
      // The claim's round trip is a start mark's too (it marked the jobs it armed): a sample for StartAhead.
      state.startAhead?.markAnswered(tookMs);
      const startBy = deadlines.buffered(sentAt);
      const runBy = deadlines.started(sentAt);
      const calls = config.options.batch;
      const batched: HeldJob[] = [];
      const late: HeldJob[] = [];
      for (const claimed of jobs) {
        const job = new HeldJob(config.queue, claimed, shared.services);
        // An older claim of this job still in our books: this process stalled past its lease (frozen, a blocked
        // event loop), the sweeper put the job back and we claimed it again before a heartbeat could tell us.
        // That claim is lost; retire it now, or its late answers would free this claim's slot and lease.
        const stale = state.held.get(job.id);
        if (stale) this.answers.lose(stale);
        state.held.set(job.id, job);
        const place = placeClaimed(claimed.buffered === true, calls !== undefined, slotsLeft);
        if (place === 'buffer') {
          job.to('buffered');
          job.startBy = startBy;
          state.buffer.add(job);
          continue;
        }
        job.startBy = runBy;
        if (place === 'batch') batched.push(job);
        else if (place === 'arm') {
          state.arm(job);
        } else {
          slotsLeft -= 1;
          if (!this.runs.startJob(job)) late.push(job);
        }
      }
      for (let i = 0; calls && i < batched.length; i += calls.size) {
        const call = batched.slice(i, i + calls.size);
        if (!this.runs.startBatch(call)) late.push(...call);
      }
      if (late.length) {
        shared.logger.warn(LATE_STARTS(config.queue, late.length, Math.round(performance.now() - sentAt), config.leaseMs));
        void state.giveBack(late, 'not started in time: this process stalled while starting the jobs of its claim');
      }
    });
    this.pump();
  }

  // ---- Eager start: a job of this process's enqueue, inserted already claimed (EagerStarts) ----

  /**
   * Whether an enqueue of this process may insert its job already claimed by this worker (QueueService.enqueue):
   * a slot is free now and nothing waits in the buffer (buffered jobs go first), the queue has no limits across
   * instances (their claims take turns under a lock) and is not a batch handler's, and the worker is not
   * stopping. The statement still decides whether it claims (insertEagerJob: not paused, nothing due before it).
   */
  get eagerSlotFree(): boolean {
    const { state } = this;
    return state.config.options.eagerStart && !state.limited && !state.stopping && state.slots.eagerSlotFree(state.armed.length, state.buffer.size, state.buffer.readAhead);
  }

  /**
   * Runs the insert of an eager start in a slot kept for it (check eagerSlotFree first): a job it comes back
   * claimed with starts at once, as a claimed job would; one that went in queued leaves the slot to the claim
   * loop (the trigger's NOTIFY wakes it). Returns the job's id; an insert that fails frees the slot and throws.
   */
  startEagerly(insert: EagerInsert): Promise<string> {
    return this.eager.start(insert);
  }

  // ---- Answers from the database and notices (RunningJobs, LeaseAnswers) ----

  /** A batch of this worker's outcomes was answered (the outcome writer, through the pool). */
  written(batch: readonly HeldJob[], statusOf: (job: HeldJob) => WrittenStatus): void {
    this.runs.written(batch, statusOf);
  }

  /** Adds this worker's jobs to a heartbeat's load (LeaseAnswers.collect). */
  collect(full: boolean, load: BeatLoad): void {
    this.answers.collect(full, load);
  }

  /** A heartbeat answered: every job it sent that `kept` lacks is no longer ours (LeaseAnswers.beatAnswered). */
  beatAnswered(load: BeatLoad, kept: Set<string>, seq: number): void {
    this.answers.beatAnswered(load, kept, seq);
  }

  /** A cancel notice (LeaseAnswers.cancelled): true if it aborted a running job. */
  cancelled(jobId: string, token: string | undefined, reason: Error): boolean {
    return this.answers.cancelled(jobId, token, reason);
  }

  // ---- Limits changed at runtime (QueueLimitsKeeper reads them from the queue's row) ----

  /**
   * The queue's limits in force changed, whether a key of it is blocked by a partner's 429 (`keyBlocks`), or whether it
   * has LIFO jobs (`lifoJobs`: background_queues.lifo_jobs, set by the first enqueue of one, never cleared): the next
   * claim and the next starts follow them. Lowering concurrency aborts nothing: fewer jobs start until the running ones
   * are under it. A switch to limits across instances changes the claim (claimLimitedJobs, under the queue's lock) and
   * gives the buffer back (a cap or a rate refuses read-ahead: a held job would have used a start; fair share alone
   * does not); the jobs this worker runs are marked `limited`, so the limited claims count them. Eager starts stop.
   */
  applyLimits(limits: EffectiveLimits, keyBlocks: boolean, lifoJobs = false, storedLimits: string | null = null): void {
    const { state } = this;
    // Set in the same synchronous step as the claim's limits below: no claim is sent between the two.
    state.storedLimits = storedLimits;
    state.slots.concurrency = limits.concurrency;
    if (state.startAhead) state.startAhead.concurrency = limits.concurrency;
    // Fair share is the decorator's (its weights change at runtime in their own table, read by every fair claim).
    const { fairness } = state.config.options;
    const limited = hasLimits({ ...limits, fairness });
    const becameLimited = limited && !state.limited;
    // Fair share alone reads ahead (its claim holds the jobs beyond the free slots in the shares); a cap or a rate does not.
    const turnedOff = refusesReadAhead(limits) && !state.buffer.off;
    state.limited = limited;
    state.buffer.off = refusesReadAhead(limits);
    const back = turnedOff ? state.buffer.takeAll() : [];
    if (back.length) void state.giveBack(back, 'its queue has limits across instances now');
    if (becameLimited) {
      const started = [...state.held.values()].filter((job) => job.state !== 'buffered').map((job) => job.id);
      const { store, logger } = state.shared;
      store.markLimited(state.config.workerId, started).catch((error: unknown) => logger.warn(LIMITED_NOT_MARKED(state.config.queue, started.length, errorLine(error))));
    }
    // A queue whose row says it has LIFO jobs (enqueued with `lifo: true`) takes them first (ClaimOrder 'mixed'); a
    // handler with `lifo: true` takes every job newest first whatever the row says.
    this.claims.setLimits(limited ? claimLimits(limits, fairness) : undefined, keyBlocks, state.config.options.lifo ? 'lifo' : lifoJobs ? 'mixed' : 'fifo');
    this.pump();
  }

  /** The queue is blocked by a partner's 429 for `ms` more: the claim loop looks again when it ends (its claims until then take nothing). */
  blockedFor(ms: number): void {
    if (ms > 0) this.claims.wakeAt(ms + 1);
  }

  /** Jobs of this queue may have been paused or rewritten where they sit in buffers: check ours before starting any (LeaseAnswers.checkBuffer). */
  checkBuffer(review = false): void {
    this.answers.checkBuffer(review);
  }

  /** A heartbeat failed: until one answers, nothing starts from the buffer (LeaseAnswers.distrust). */
  distrust(): void {
    this.answers.distrust();
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
    const { state } = this;
    // Inline rather than through guarded(): this runs after every job, and a closure a call was measurable.
    try {
      // Armed jobs' rows say started already: what a check would confirm (a cancel, a pause or replace of buffered
      // rows) does not touch them, and their leases are the full ones, so they start while a check is pending.
      if (!state.stopping && state.armed.length > 0) this.startArmed();
      if (!state.stopping && state.unconfirmedUntilSeq === 0 && state.buffer.size > 0) this.startFromBuffer();
      if (this.marks.waiting > 0) this.marks.send();
    } catch (error) {
      state.shared.logger.error(WORKER_DEFECT(state.config.queue, 'starting buffered jobs', errorLine(error)));
    }
    if (!state.stopping && this.claimWant() > 0) this.claims.rouse();
  }

  /** Armed jobs (marked already) take the free slots first, in claim order. */
  private startArmed(): void {
    const { armed, slots } = this.state;
    let late: HeldJob[] | undefined;
    while (armed.length > 0 && slots.slotForStarted()) {
      const job = armed.shift()!;
      if (!this.runs.startJob(job)) (late ??= []).push(job);
    }
    if (late) void this.state.giveBack(late, 'marked started, not started in time');
  }

  /**
   * Start marks for the jobs that take the free slots, then for up to StartAhead's depth more (armed when they
   * land). A job on its last attempt is never marked ahead of a free slot (a death of this process would then
   * dead-letter a job that never ran): the jobs behind it wait for it.
   */
  private startFromBuffer(): void {
    const { state } = this;
    const now = performance.now();
    const expired: HeldJob[] = [];
    const depth = state.startAhead?.depth ?? 0;
    for (let next = state.slots.nextMark(state.armed.length, depth); next; next = state.slots.nextMark(state.armed.length, depth)) {
      const job = state.buffer.next(now, expired, next === 'ahead' ? mayStartAhead : undefined);
      if (!job) break;
      this.marks.gather(job);
    }
    if (expired.length) void state.giveBack(expired, 'past their start deadline');
  }

  /**
   * Every BUFFER_REVIEW_MS: gives back buffered jobs past their start deadline, and with 'auto' the surplus of jobs
   * running far longer than the estimate (slow or stuck), seen before any finishes by how long no slot has freed while
   * all are busy (a sample for both estimates whenever jobs wait, buffered or armed). A late tick means this process
   * itself stalled (a blocked event loop, a busy machine): its sample says nothing about the jobs.
   */
  private reviewBuffer(): void {
    const { state } = this;
    const now = performance.now();
    const late = now - this.lastReviewAt > 2 * BUFFER_REVIEW_MS;
    this.lastReviewAt = now;
    if (state.stopping) return;
    const stalledMs = stalledFor(state.slots.allBusy(), late, now, state.lastFreedAt);
    let changed = false;
    // Only armed jobs waiting (after fast jobs a claim arms all it takes): the stall is ReadAhead's sample too, or those
    // given back below went back at the fast jobs' read-ahead, and this worker's own next claim took them all back.
    if (stalledMs !== undefined && state.buffer.size === 0 && state.armed.length > 0) state.buffer.auto?.stalled(stalledMs);
    if (state.buffer.size > 0) {
      const out = state.buffer.review(now, stalledMs ?? 0);
      if (out.length) state.giveBack(out, 'held too long or beyond the read-ahead');
      changed = out.length > 0;
    }
    if (state.armed.length > 0) {
      // A stall is a sample (StartAhead.stalled): slow or stuck jobs stop being armed. Armed jobs no slot freed for in
      // time go back uncharged, and those beyond a depth that shrank once nothing waits in the buffer behind them, so
      // that what goes back is the end of the claim order (not lower-priority jobs started first).
      if (stalledMs !== undefined) state.startAhead?.stalled(stalledMs);
      const keep = state.buffer.size === 0 ? (state.startAhead?.depth ?? 0) : Infinity;
      const out = armedGoingBack(state.armed, now, keep);
      if (out.length) {
        for (const job of out) state.disarm(job);
        void state.giveBack(out, 'marked started ahead, beyond the depth or no slot freed in time');
        changed = true;
      }
    }
    if (changed || state.buffer.size > 0) this.pump();
  }

  // ---- Shutdown ----

  /** Stops claiming, then puts the buffer back at once (before the drain of running jobs). */
  async stopClaiming(): Promise<void> {
    const { state } = this;
    state.stopping = true;
    clearInterval(this.reviewTimer);
    await this.claims.stop();
    // An eager insert in flight comes back to a stopping worker: its job goes back at once (EagerStarts.accept).
    await Promise.allSettled(this.eager.inFlight);
    // A start mark in flight: its jobs go back when it answers (StartMarks.marked); those still waiting for one go back now.
    while (this.marks.inFlight) await this.marks.inFlight;
    const waiting = this.marks.takeWaiting();
    // Armed jobs go back uncharged (releaseJobs takes back the attempt of a row that says started).
    const buffered = [...state.armed.splice(0), ...waiting, ...state.buffer.takeAll()];
    if (buffered.length) await state.giveBack(buffered, 'shutting down');
  }

  /** Resolves when no handler is running any more, or after graceMs. */
  drain(graceMs: number): Promise<void> {
    return this.runs.drain(graceMs);
  }

  /** Shutdown past the grace period: abort what still runs and forget it (the caller puts the rows back). */
  abandonAll(): JobRef[] {
    return this.runs.abandonAll();
  }
}

/** What a limited claim enforces: the limits in force, and the queue's fair share (its weights' defaults) if it has one. */
function claimLimits(limits: Pick<ClaimLimits, 'globalConcurrency' | 'rateLimit' | 'concurrencyPerKey'>, fairness: ResolvedFairness | undefined): ClaimLimits {
  const { globalConcurrency, rateLimit, concurrencyPerKey } = limits;
  return { globalConcurrency, rateLimit, concurrencyPerKey, ...(fairness && { fairness: { weights: fairness.weights, defaultWeight: fairness.defaultWeight } }) };
}
