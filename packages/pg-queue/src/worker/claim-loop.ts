import type { LoggerService } from '@nestjs/common';
import type { ClaimOrder } from '../store/claim.sql.js';
import type { ClaimedJob, ClaimLimits, JobStore } from '../store/job.store.js';
import { tracingActive } from '../tracing/tracer.js';
import { RetryBackoff, wakeableSleep } from '../utils/retry-backoff.js';
import { putBack } from './put-back.js';

/** How soon a queue at its globalConcurrency looks again for a slot freed in another process. */
const LIMIT_POLL_MS = 200;

/**
 * While a keyed or fair queue's last look found no due job without a key, how long its claims go without looking: the
 * look reads the queue's first 200 due jobs, a heap fetch apiece (claim-keyed.sql.ts, keylessDue), on every claim of a
 * queue whose jobs all have keys. A job without a key waits at most this long more to be seen.
 */
export const KEYLESS_LOOK_MS = 100;

/** What the claim loop asks work for and hands it to: the queue's worker. */
export interface ClaimTarget {
  /** How many jobs a claim should ask for now; 0 when one is not worth a round trip (slots, buffer, unwritten outcomes). */
  claimWant(): number;
  /**
   * A claim of `want` is being sent: how many of its jobs may start at once (`startNow`: those slots stay reserved
   * until accept() or claimFailed()), and how many more the claim marks started for the worker to hold ahead of a
   * free slot (`armAhead`: StartAhead).
   */
  reserveSlots(want: number): { startNow: number; armAhead: number };
  /** The claim came back (jobs in the claim's order; `sentAt` is performance.now() when it was sent). */
  accept(jobs: ClaimedJob[], sentAt: number): void;
  /** The claim failed (it claimed nothing) or came back during shutdown (its jobs were put back). */
  claimFailed(): void;
  /** Whether the claim should return wait_ms and trace_context (listeners, tracing). */
  readonly observed: boolean;
  /** The worker's copy of the queue's stored limits, which the claim sends for the row to compare (WorkerState.storedLimits). */
  readonly storedLimits: string | null;
}

/** A claim loop as health checks read it (ClaimLoop.state). */
export interface ClaimLoopState {
  claimingForMs: number;
  ended: boolean;
  sinceAnswerMs: number;
  held: boolean;
}

export interface ClaimLoopConfig {
  queue: string;
  workerId: string;
  leaseMs: number;
  /** A buffered job's lease (see BUFFER_LEASE_MS). */
  bufferLeaseMs: number;
  /**
   * Set for a queue with limits across instances: its claims go through claimLimitedJobs (nothing is read ahead, but
   * with fair share alone).
   * Changed at runtime with the limits stored for the queue (QueueWorker.applyLimits), read by each claim.
   */
  limits: ClaimLimits | undefined;
  /** A key of the queue is blocked by a partner's 429: claims take the variant that passes over its jobs. */
  keyBlocks?: boolean;
  /**
   * The order claims take the queue's due jobs in (ClaimOrder in store/claim.sql.ts): 'lifo' for a handler with
   * `lifo: true`; 'mixed' once the queue's row says it has LIFO jobs (QueueWorker.applyLimits); else 'fifo', the plain
   * claim. Read by each claim.
   */
  order?: ClaimOrder;
  /**
   * A batch handler's waitMs: after a claim that came back short (fewer due jobs than the free calls could take),
   * the next claim waits this long after it is asked for, so that a batch can fill in the table (not in memory: a
   * job waiting for its batch can still be cancelled, paused or replaced like any queued job).
   */
  gatherMs?: number;
}

/**
 * When and how much to claim for one queue, and nothing else (River's producer: fetch when there is room). It
 * sleeps until woken by: a NOTIFY for its queue, a slot freeing up (the worker rouses it when a claim is worth
 * making), the timer of the next delayed job (learned from the claim itself), a limit's hold running out, or
 * the pool's poll. Wake-ups coalesce into one flag, so a burst of 10k notifications costs one claim, not 10k.
 */
export class ClaimLoop {
  private wakeRequested = true;
  private wakeUp: (() => void) | undefined;
  private stopping = false;
  private loop: Promise<void> | undefined;
  private delayTimer: NodeJS.Timeout | undefined;
  private delayTimerAt = Infinity;
  private readonly backoff: RetryBackoff;
  /** performance.now() before which a limit of the queue allows no claim (see hold()). */
  private heldUntil = 0;
  private holdLiftable = false;
  private holdTimer: NodeJS.Timeout | undefined;
  /** concurrencyPerKey: the key this worker's next claim starts its turn after. */
  private keyCursor = '';
  /** A keyed or fair queue: performance.now() from which its claims look for due jobs without a key again (KEYLESS_LOOK_MS). */
  private keylessLookAt = 0;
  /** performance.now() when the claim in flight was sent (0: none), and whether the loop has ended: for health checks. */
  private sentAt = 0;
  private ended = false;
  /**
   * performance.now() when a claim last answered (rows or none), or when the loop started: readiness reads how long
   * ago (a queue with due jobs and free slots that no claim has answered for a while is wedged). The loop is the
   * only owner of this fact; one assignment per claim, nothing per job.
   */
  private answeredAt = 0;
  /** The last claim came back short: with gatherMs, the next one lets a batch fill first. */
  private gatherFirst = false;

  constructor(
    private readonly config: ClaimLoopConfig,
    private readonly store: JobStore,
    private readonly target: ClaimTarget,
    private readonly logger: LoggerService,
  ) {
    this.backoff = new RetryBackoff(`claiming jobs of queue "${config.queue}"`, logger);
  }

  /**
   * How long the claim in flight has waited (0: none), whether the loop has ended, how long ago a claim last answered
   * (`sinceAnswerMs`, from the loop's start before the first), and whether a limit of the queue holds claims back on
   * purpose now (`held`: a rate limit's window or capacity, a batch gathering).
   */
  get state(): ClaimLoopState {
    const now = performance.now();
    return {
      claimingForMs: this.sentAt === 0 ? 0 : now - this.sentAt,
      ended: this.ended,
      sinceAnswerMs: this.answeredAt === 0 ? 0 : now - this.answeredAt,
      held: this.heldUntil > now,
    };
  }

  /** The order of the queue's claims now (ClaimOrder): 'fifo' unless the queue has LIFO. */
  get order(): ClaimOrder {
    return this.config.order ?? 'fifo';
  }

  /** True while the last claim failed (the database unreachable or refusing). */
  get failing(): boolean {
    return this.backoff.failing;
  }

  start(): void {
    if (this.answeredAt === 0) this.answeredAt = performance.now();
    this.loop ??= this.run().finally(() => (this.ended = true));
  }

  /** There may be work (NOTIFY, poll, reconnect, a slot freed): claim when a claim is worth making. */
  wake(): void {
    this.wakeRequested = true;
    this.rouse();
  }

  /** There may be work (a slot freed), but claim only when the worker next finds a claim worth making (rouse). */
  noteWork(): void {
    this.wakeRequested = true;
  }

  /** Lets a sleeping loop look again, without saying there is new work (wakeRequested stays as it is). */
  rouse(): void {
    const wakeUp = this.wakeUp;
    this.wakeUp = undefined;
    wakeUp?.();
  }

  /**
   * The queue's limits changed at runtime (QueueWorker.applyLimits): the next claim uses them; a hold of the old ones
   * (a rate window, capacity) ends, since the new limits may allow a claim now.
   */
  setLimits(limits: ClaimLimits | undefined, keyBlocks: boolean, order: ClaimOrder = this.config.order ?? 'fifo'): void {
    this.config.limits = limits;
    this.config.keyBlocks = keyBlocks;
    this.config.order = order;
    this.heldUntil = 0;
    this.holdLiftable = false;
    clearTimeout(this.holdTimer);
    this.wake();
  }

  /** An outcome of this process was written: at a limit's capacity, that is a slot freed (see hold()). */
  slotFreedInDatabase(): void {
    if (!this.holdLiftable) return;
    this.holdLiftable = false;
    this.heldUntil = 0;
    clearTimeout(this.holdTimer);
    this.rouse();
  }

  /** Stops claiming; resolves when the loop has ended (a claim in flight puts its jobs back). */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.delayTimer);
    clearTimeout(this.holdTimer);
    this.heldUntil = 0;
    this.wake();
    await this.loop;
  }

  /** Arms one timer for the earliest known delayed job; DB-computed delay, so app clock skew does not matter. */
  wakeAt(delayMs: number): void {
    const at = performance.now() + delayMs;
    if (this.stopping || at >= this.delayTimerAt) return;
    clearTimeout(this.delayTimer);
    this.delayTimerAt = at;
    this.delayTimer = setTimeout(() => {
      this.delayTimerAt = Infinity;
      this.wake();
    }, Math.min(Math.ceil(delayMs) + 1, 2_147_483_647));
  }

  private async run(): Promise<void> {
    const { queue, workerId, leaseMs, bufferLeaseMs } = this.config;
    while (!this.stopping) {
      const { limits, keyBlocks = false, order = 'fifo' } = this.config; // changed at runtime (applyLimits): read per claim
      const want = this.target.claimWant();
      if (want === 0 || !this.wakeRequested || this.heldUntil > performance.now()) {
        await new Promise<void>((resolve) => (this.wakeUp = resolve));
        continue;
      }
      if (this.gatherFirst && this.config.gatherMs) {
        this.gatherFirst = false;
        this.hold(this.config.gatherMs, false);
        continue;
      }
      this.wakeRequested = false;
      const { startNow, armAhead } = this.target.reserveSlots(want);
      const sentAt = (this.sentAt = performance.now());
      const lookKeyless = sentAt >= this.keylessLookAt;
      let claimed;
      try {
        claimed = limits
          ? await this.store.claimLimitedJobs(queue, want, workerId, leaseMs, limits, this.keyCursor, keyBlocks, order, lookKeyless, { startNow, bufferLeaseMs }, this.target.storedLimits)
          : await this.store.claimJobs(queue, want, workerId, leaseMs, this.target.observed || tracingActive(), { startNow, armAhead, bufferLeaseMs }, keyBlocks, order, this.target.storedLimits);
        // A claim that never got its queue's lock said nothing about the queue: a wedge (readiness) all the same.
        if (!claimed.lockBusy) this.answeredAt = performance.now();
        this.backoff.succeeded();
      } catch (error) {
        this.sentAt = 0;
        this.target.claimFailed();
        this.wakeRequested = true; // try again after the backoff, or sooner when woken (LISTEN is back)
        const backoff = wakeableSleep(this.backoff.failed(error));
        this.wakeUp = backoff.wake;
        await backoff.done;
        if (this.wakeUp === backoff.wake) this.wakeUp = undefined;
        continue;
      }
      this.sentAt = 0;
      if (this.stopping) {
        // The claim was in flight when shutdown began: none of its jobs may start; they go back at once.
        this.target.claimFailed();
        await putBack(this.store, workerId, claimed.jobs, `claimed while shutting down (${queue})`, this.logger);
        return;
      }
      if (claimed.keyCursor !== undefined) this.keyCursor = claimed.keyCursor;
      // Found some: look again at the next claim; found none: not before KEYLESS_LOOK_MS.
      if (claimed.keylessSeen !== undefined) this.keylessLookAt = claimed.keylessSeen ? 0 : sentAt + KEYLESS_LOOK_MS;
      this.target.accept(claimed.jobs, sentAt);
      this.gatherFirst = claimed.jobs.length < want;
      if (claimed.jobs.length === want) this.wakeRequested = true; // more may be waiting
      else if (claimed.rateWaitMs != null) this.hold(claimed.rateWaitMs, false);
      // Another claimer held the queue's lock throughout (claimLimitedJobs tries it): no limit holds this loop back, it tries
      // again at once (readiness must still see a queue nobody can claim, not one held back on purpose).
      else if (claimed.lockBusy) this.wakeRequested = true;
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
}
