import type { ClaimedJob } from '../store/job.store.js';
import { JobAttempt, type JobServices } from './job-attempt.js';
import type { CommittedCompletion } from './transactional-attempt.js';

/**
 * Where a job this process holds stands. Every change goes through `HeldJob.to()`, which refuses any move the
 * table below does not list: the worker's bookkeeping (slots, buffer, unwritten outcomes) follows the state,
 * so a second answer for the same job (a late handler result after a loss, a cancel notice after the outcome)
 * finds a state that does not take it, and changes nothing.
 *
 * - claimed: just back from the claim (or from an eager start's insert, which is its claim); it starts at once (the
 *   claim marked it started) or waits in the buffer.
 * - buffered: claimed ahead of a free slot, not started; its row says `buffered`, uncharged, on a short lease.
 * - starting: taken out of the buffer (or back from an eager start's insert) into a slot; its start mark (charged,
 *   `buffered = false`, the full lease) is on its way to the row, or waits for the one in flight. It starts only once
 *   the row has taken the mark; a refused mark means the row is no longer this claim's (lost, never started).
 * - armed: its claim or its start mark started it before a slot was free for it (marked ahead: StartAhead); its row says started
 *   (charged, the full lease, renewed by heartbeats), its handler not called yet. It starts when a slot frees, in claim
 *   order, ahead of anything still in the buffer; it goes back (uncharged again) if it waits past its start deadline.
 * - running: its handler was called; the slot is taken; its row says it started.
 * - settling: the handler ended; the outcome waits for the outcome writer; the lease is still renewed.
 * - written: the outcome landed (terminal).
 * - given-back: put back in the queue by this process (buffer surplus or expiry, pause, shutdown) (terminal).
 * - lost: the row is no longer this claim's (swept, replaced, fenced out, refused for good) (terminal).
 * - cancelled: a cancel notice named this claim (terminal).
 */
export type HeldState = 'claimed' | 'buffered' | 'starting' | 'armed' | 'running' | 'settling' | 'written' | 'given-back' | 'lost' | 'cancelled';

/**
 * The moves a held job may make, from each state: the one table of transitions (docs/concepts.md, The life of a held
 * job, lists each with the event that makes it and the part of the worker that does; test/unit/held-job.spec.ts walks
 * every entry and checks the two agree).
 */
export const NEXT: Readonly<Record<HeldState, readonly HeldState[]>> = {
  claimed: ['running', 'buffered', 'starting', 'armed', 'given-back'],
  buffered: ['starting', 'given-back', 'lost', 'cancelled'],
  starting: ['running', 'armed', 'given-back', 'lost', 'cancelled'],
  armed: ['running', 'given-back', 'lost', 'cancelled'],
  running: ['settling', 'lost', 'cancelled', 'given-back'],
  settling: ['written', 'lost'],
  written: [],
  'given-back': [],
  lost: [],
  cancelled: [],
};

/**
 * One call of a batch handler: its jobs (each a HeldJob, in state running while the call runs), how many of them
 * still run (a cancelled or lost one leaves early), and the call's timeout timer.
 */
export class BatchRun {
  live: number;
  timer: NodeJS.Timeout | undefined;

  constructor(readonly jobs: readonly HeldJob[]) {
    this.live = jobs.length;
  }
}

/** A move the table does not allow: a defect of the worker, never of the app. */
export class IllegalTransitionError extends Error {
  override name = 'IllegalTransitionError';
}

/** Failed attempt: what to store, and `final` to fail the job for good whatever attempts are left. */
export interface AttemptFailure {
  error: string;
  retryDelayMs: number;
  thrown: unknown;
  final?: boolean;
}

/**
 * One claim of one job, from the claim to its last word: the Job its handler sees (JobAttempt), what the
 * heartbeat renews or checks, and the outcome the outcome writer settles, in one object (one allocation per
 * claim: at 20k jobs/s the garbage collector had taken 12% of the worker's CPU with one object per role).
 */
export class HeldJob extends JobAttempt {
  state: HeldState;
  /**
   * performance.now() after which the job may no longer start (it goes back instead): half its lease after the
   * claim was sent (or the start mark, for a job started from the buffer); for a buffered job, the first half of the
   * buffer's short lease (its start mark must reach the row while the short lease holds). Once running, half the lease
   * after the last heartbeat that renewed it: a thread handler's thread asks before it calls the function (ThreadPool),
   * which the job may not begin once its lease may have lapsed in a stall of this process.
   */
  startBy = Infinity;
  /** performance.now() when the handler was called, and when it ended or was given up on. */
  startedAt = 0;
  endedAt = 0;
  timer: NodeJS.Timeout | undefined;
  /** The outcome, set when the handler ends: a failure, a snooze (ms until it runs again), or neither (completed). */
  failure: AttemptFailure | undefined;
  snoozeMs: number | undefined;
  /** The handler threw RateLimitedError: the block it asks (the snooze's last_error note says so). */
  rateLimited: { ms: number; key: string | undefined; note: string } | undefined;
  /** What the handler returned (a completion only), and its JSON text when there is one to store. */
  result: unknown;
  resultJson: string | undefined;
  /** Times the database refused this outcome's row (not counting outages). */
  refusals = 0;
  /**
   * The call of a batch handler this job runs in (undefined: a job run alone), or the completion a transactional
   * handler's own transaction committed (nothing left to write): one field for the two, as only some jobs have either.
   */
  private shape: { batch?: BatchRun; committed?: CommittedCompletion } | undefined;
  /** Due to claimed, by the database clock (the 'active' event carries it). */
  readonly claimLatencyMs: number | undefined;
  /** The claim said the row has no unique key (CompletedAttempt.keyless). */
  readonly keyless: boolean;

  constructor(queue: string, job: ClaimedJob, services?: JobServices) {
    super(queue, job, services);
    this.claimLatencyMs = job.waitMs;
    this.keyless = job.keyless === true;
    this.state = 'claimed';
  }

  get batch(): BatchRun | undefined {
    return this.shape?.batch;
  }

  set batch(batch: BatchRun | undefined) {
    (this.shape ??= {}).batch = batch;
  }

  get committed(): CommittedCompletion | undefined {
    return this.shape?.committed;
  }

  set committed(committed: CommittedCompletion | undefined) {
    (this.shape ??= {}).committed = committed;
  }

  /** Moves to `next`, or throws IllegalTransitionError. */
  to(next: HeldState): void {
    if (!NEXT[this.state].includes(next)) throw new IllegalTransitionError(`job ${this.id} (${this.queue}): ${this.state} -> ${next} is not a transition`);
    this.state = next;
  }
}
