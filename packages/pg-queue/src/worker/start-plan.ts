import { bufferLease } from './job-buffer.js';

/**
 * The worker's decisions about its slots, as pure code over plain numbers: how many jobs to claim, how many of a
 * claim start at once and how many it marks started ahead, which held job goes where when its claim or its start mark
 * answers, what to mark next from the buffer, what goes back at a review. No clock (the caller passes `now`), no I/O,
 * no jobs beyond their start deadlines: unit-tested alone (test/unit/start-plan.spec.ts). QueueWorker and its parts
 * keep the counts here, apply the answers and carry out what these decide.
 *
 * A slot is counted in exactly one of: `running` (a handler called), `starting` (taken from the buffer, its start
 * mark gathered or in flight), `reserved` (kept for the jobs of the claim in flight that start at once; a batch
 * handler's: calls), `eager` (kept for an eager start's insert in flight), or an armed job (held started ahead of a
 * free slot, counted by the caller's list). Jobs in the buffer hold no slot.
 */

/** A job may be marked started ahead of a free slot unless this is its last attempt (see QueueWorker.startFromBuffer). */
export const mayStartAhead = (job: { attempt: number; maxAttempts: number }): boolean => job.attempt < job.maxAttempts;

/** Where a job of a claim goes (QueueWorker.accept). */
export type ClaimedPlace = 'buffer' | 'batch' | 'arm' | 'start';
/** What becomes of a `starting` job when its start mark answers (StartMarks.marked). */
export type MarkedPlace = 'lost' | 'give-back' | 'arm' | 'start';
/** What becomes of a job an eager start's insert came back claimed with (EagerStarts.accept). */
export type EagerPlace = 'give-back' | 'stale' | 'mark' | 'arm' | 'start';
/** What the buffer gives next (QueueWorker.startFromBuffer): a job for a free slot, one to mark ahead of one, or none. */
export type NextMark = 'slot' | 'ahead' | undefined;

/**
 * Where a job of a claim goes: a buffered row into the buffer; a started one into a batch handler's call, into one of
 * the slots reserved for the claim (`slotsLeft`: those not taken yet by the jobs before it) or, beyond them, armed (the
 * claim marked it started ahead: reserveSlots' armAhead).
 */
export function placeClaimed(buffered: boolean, batched: boolean, slotsLeft: number): ClaimedPlace {
  if (buffered) return 'buffer';
  if (batched) return 'batch';
  return slotsLeft <= 0 ? 'arm' : 'start';
}

/**
 * Armed jobs that go back at a review: those past their start deadline, and those beyond `keep` (StartAhead's depth;
 * the caller passes Infinity while jobs wait in the buffer behind them: what goes back must be the end of the claim
 * order, or later jobs would start first).
 */
export function armedGoingBack<T extends { startBy: number }>(armed: readonly T[], now: number, keep: number): T[] {
  return armed.filter((job, i) => now >= job.startBy || i >= keep);
}

/**
 * The review's stall sample: how long no slot has freed while all were busy (`now - lastFreedAt`), or undefined when a
 * slot is free or the review itself came late (`late`: this process was stalled, so the time says nothing of the jobs).
 */
export function stalledFor(busy: boolean, late: boolean, now: number, lastFreedAt: number): number | undefined {
  return busy && !late ? now - lastFreedAt : undefined;
}

/**
 * When a held job may still start (its start deadline, a performance.now() time), counted from when the statement that
 * claimed or marked it was sent, and when a claim's answer came too late for any of its jobs to start.
 */
export class StartDeadlines {
  /** A buffered job's lease (the claim's `bufferLeaseMs`) and the margin its start mark keeps (bufferLease). */
  readonly bufferLeaseMs: number;
  readonly marginMs: number;

  constructor(readonly leaseMs: number) {
    const lease = bufferLease(leaseMs);
    this.bufferLeaseMs = lease.leaseMs;
    this.marginMs = lease.marginMs;
  }

  /** A buffered job's: the first half of the buffer's short lease (its start mark must reach the row while that holds). */
  buffered(sentAt: number): number {
    return sentAt + this.bufferLeaseMs - this.marginMs;
  }

  /** A job whose row says started (its claim or its start mark, sent at `sentAt`): the first half of its lease. */
  started(sentAt: number): number {
    return sentAt + this.leaseMs / 2;
  }

  /** A claim (or eager insert) answered after `tookMs`: the leases it gave may have lapsed meanwhile (QueueWorker.accept). */
  stale(tookMs: number): boolean {
    return tookMs > this.leaseMs / 2;
  }
}

/** The slots of one queue's worker, counted (see the top of this file), and the decisions read from the counts. */
export class Slots {
  /** Jobs running now (handlers called and not ended). */
  running = 0;
  /** Jobs in state `starting`: their slots are taken, their start marks gathered or in flight (see QueueWorker.pump). */
  starting = 0;
  /** Slots kept for the jobs of the claim in flight that start at once (a batch handler's: for its calls). */
  reserved = 0;
  /** Slots kept for eager starts in flight: jobs of this process's enqueues inserted already claimed (EagerStarts). */
  eager = 0;
  /** A batch handler's calls running now (concurrency counts these, not jobs). */
  runningBatches = 0;
  /** Outcomes handed to the writer and not answered yet; their leases are still held. */
  settling = 0;

  /**
   * @param concurrency the handler's slots (a batch handler's: calls)
   * @param batchSize the most jobs one claim takes
   * @param callSize a batch handler's jobs per call; undefined for a handler of one job
   */
  constructor(
    /** Changed at runtime by the queue's limits (QueueWorker.applyLimits): lowered, the counts above it only start fewer. */
    public concurrency: number,
    readonly batchSize: number,
    readonly callSize: number | undefined,
  ) {}

  /**
   * How many jobs a claim should ask for now (ClaimTarget.claimWant), given the jobs held `armed` and in the buffer
   * (`buffered`), the buffer's read-ahead now and whether it is `'auto'`; 0 when a claim is not worth a round trip.
   */
  claimWant(armed: number, buffered: number, readAhead: number, auto: boolean): number {
    const { concurrency, batchSize, callSize } = this;
    if (callSize !== undefined) {
      // A batch handler: a full batch for each free call. A call's jobs settle all at once, so the next claim may go
      // while one turn of outcomes is being written (at one call at a time, waiting for them made every claim wait
      // for the previous call's write: 30% fewer jobs/s); not while more than a turn waits.
      if (this.settling > concurrency * callSize) return 0;
      return Math.max(0, concurrency - this.runningBatches - this.reserved) * callSize;
    }
    const turn = concurrency + readAhead; // as many jobs as this worker may hold
    // Back-pressure: while a full turn of outcomes waits to be written, claiming more only grows the pile.
    // Unbounded, a slow database let thousands of finished jobs sit in `processing` until their leases ran
    // out and they ran again.
    if (this.settling >= turn) return 0;
    // With prefetch, claims run ahead of free slots so that one round trip brings a whole batch (no-op jobs at
    // concurrency 10 were bound by one claim round trip per 10 jobs); the buffer is topped up only when half a
    // batch fits. With 'auto', the read-ahead and so the batch follow the measured durations (ReadAhead).
    const batch = auto ? Math.min(batchSize, turn) : batchSize;
    const want = Math.min(batch, turn - this.running - this.starting - armed - this.reserved - this.eager - buffered);
    return want > 0 && (buffered === 0 || want >= Math.ceil(batch / 2)) ? want : 0;
  }

  /**
   * Slots with no job in them (health checks): neither running, starting, armed nor kept for an eager start. A claim in
   * flight's reserved slots count as idle: they fill only when it answers, and a wedged claim never does.
   */
  idle(armed: number): number {
    if (this.callSize !== undefined) return Math.max(0, this.concurrency - this.runningBatches);
    return Math.max(0, this.concurrency - this.running - this.starting - armed - this.eager);
  }

  /**
   * A claim of `want` is being sent (ClaimTarget.reserveSlots): the slots its jobs that start at once take are kept
   * (`reserved`, until the claim answers), and the claim marks started `armAhead` more for the worker to hold ahead of a
   * free slot, up to `depth` (StartAhead's) held or on their way. `keepOrder`: the jobs must start in claim order across
   * claims (a LIFO queue), so none is armed by a claim while an earlier one waits for its start mark.
   */
  reserve(want: number, armed: number, buffered: number, depth: number, keepOrder = false): { startNow: number; armAhead: number } {
    if (this.callSize !== undefined) {
      this.reserved += Math.ceil(want / this.callSize);
      return { startNow: want, armAhead: 0 }; // every job of the claim starts now, in the calls reserved for it
    }
    const concurrency = this.concurrency;
    const free = concurrency - this.running - this.starting - armed - this.reserved - this.eager;
    const startNow = Math.max(0, Math.min(want, free));
    this.reserved += startNow;
    // Beyond the free slots, the claim itself marks started the jobs StartAhead wants held ahead (no start mark for
    // them later), unless jobs wait in the buffer (they go first, through start marks): those already marked ahead,
    // or on their way to be, count against it.
    const ahead = Math.max(0, this.running + this.starting + armed + this.reserved + this.eager - concurrency);
    // `keepOrder` (a LIFO queue: ClaimOrder): nor while a job of an earlier claim waits for its start mark. Armed by
    // this claim, its jobs would be ahead of that job (armed when its mark lands, behind them) and start first.
    const armAhead = buffered === 0 && !(keepOrder && this.starting > 0) ? Math.max(0, Math.min(want - startNow, depth - ahead)) : 0;
    return { startNow, armAhead };
  }

  /**
   * Whether an enqueue of this process may insert its job claimed by this worker (QueueWorker.eagerSlotFree, with the
   * queue's eagerStart and the worker not stopping): a slot is free now, nothing waits in the buffer or armed (they go
   * first), and outcomes do not pile up beyond a turn.
   */
  eagerSlotFree(armed: number, buffered: number, readAhead: number): boolean {
    return buffered === 0 && armed === 0 && this.running + this.starting + this.reserved + this.eager < this.concurrency && this.settling < this.concurrency + readAhead;
  }

  /**
   * Whether a slot is free for a job whose row says started (an armed job, or one whose mark just landed): jobs still
   * `starting` do not count, as those already started go first and a mark that lands after them leaves its job armed.
   */
  slotForStarted(): boolean {
    return this.running + this.reserved + this.eager < this.concurrency;
  }

  /**
   * A start mark answered for a job still `starting` (its `starting` count already taken back): refused, it is lost; in
   * a shutdown, or after a review asked while the mark was on its way (a pause), it goes back (`goBack`); otherwise it
   * starts if a slot is free and no armed job waits before it, else it is armed.
   */
  afterMark(marked: boolean, goBack: boolean, armed: number): MarkedPlace {
    if (!marked) return 'lost';
    if (goBack) return 'give-back';
    return armed > 0 || !this.slotForStarted() ? 'arm' : 'start';
  }

  /**
   * An eager insert came back with its job claimed (its `eager` slot already taken back): during a shutdown it goes
   * back; past its start deadline (`inTime` false) it goes back as a stale claim; a buffered row gets its start mark; a
   * started one starts in a free slot, or is armed behind the armed jobs and the slots taken (starting ones too).
   */
  afterEagerInsert(stopping: boolean, inTime: boolean, buffered: boolean, armed: number): EagerPlace {
    if (stopping) return 'give-back';
    if (!inTime) return 'stale';
    if (buffered) return 'mark';
    return armed > 0 || this.running + this.starting + this.reserved + this.eager >= this.concurrency ? 'arm' : 'start';
  }

  /**
   * Whether to take one more job from the buffer into a start mark (QueueWorker.startFromBuffer): 'slot' while slots are
   * free, 'ahead' beyond them up to `depth` (StartAhead's: the job is armed when its mark lands, and never one on its
   * last attempt), undefined when no more. Each job gathered counts as `starting` before the next question.
   */
  nextMark(armed: number, depth: number): NextMark {
    const ahead = this.running + this.starting + armed + this.reserved + this.eager - this.concurrency;
    if (ahead >= depth) return undefined;
    return ahead >= 0 ? 'ahead' : 'slot';
  }

  /** Every slot runs or starts a job: the review's stall samples count only then. */
  allBusy(): boolean {
    return this.running + this.starting >= this.concurrency;
  }
}
