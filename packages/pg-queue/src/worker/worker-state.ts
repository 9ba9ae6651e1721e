import type { LoggerService } from '@nestjs/common';
import type { JobEvents } from '../events/job-events.js';
import type { Job } from '../interfaces/job.interface.js';
import type { ResolvedHandlerOptions } from '../interfaces/job-handler-options.interface.js';
import { HELD_JOBS_GIVEN_BACK, HELD_JOBS_NOT_GIVEN_BACK, WORKER_DEFECT } from '../pg-queue.messages.js';
import type { JobStore } from '../store/job.store.js';
import { errorLine } from '../utils/error-text.js';
import { hasLimits, refusesReadAhead } from '../utils/resolve-options.js';
import { withTimeout } from '../utils/retry-backoff.js';
import { AttemptReport } from './attempt-report.js';
import type { HeldJob } from './held-job.js';
import type { JobServices } from './job-attempt.js';
import { JobBuffer } from './job-buffer.js';
import type { OutcomeWriter } from './outcome-writer.js';
import { PUT_BACK_DEADLINE_MS } from './put-back.js';
import type { RateLimitSink } from './queue-limits-keeper.js';
import type { RowLockLane } from './row-lock-lane.js';
import { StartAhead } from './start-ahead.js';
import { Slots, StartDeadlines } from './start-plan.js';

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
  /** Where a handler's 429 (RateLimitedError) and a success go (QueueLimitsKeeper); absent in tests of one worker. */
  rateLimits?: RateLimitSink;
}

/**
 * What one queue's worker knows of the jobs it holds, shared by its parts (QueueWorker: claims and the buffer's
 * starts; RunningJobs: run and settle; StartMarks: the start mark; LeaseAnswers: heartbeats, cancels, losses;
 * EagerStarts): every job held and not finished with, each in one state (HeldJob), where each waits (the buffer, the
 * armed list), the slots counted (Slots), and the two moves every part makes: forgetting a job and giving jobs back.
 */
export class WorkerState {
  /** Every job held and not finished with, by id: buffered, starting, armed, running or settling. */
  readonly held = new Map<string, HeldJob>();
  readonly buffer: JobBuffer;
  /** Jobs in state `armed` (marked ahead of a free slot: StartAhead), in claim order: the next to start. */
  readonly armed: HeldJob[] = [];
  readonly slots: Slots;
  /** How many jobs to mark ahead of the free slots; undefined for a batch handler (its calls start from claims). */
  readonly startAhead: StartAhead | undefined;
  readonly deadlines: StartDeadlines;
  /**
   * The queue has limits (globalConcurrency, rateLimit, concurrencyPerKey): see RunningJobs.freeSlot. Changed at runtime
   * when the limits stored for the queue change (QueueWorker.applyLimits).
   */
  limited: boolean;
  /**
   * This process's copy of the limits stored for the queue (background_queues.limits as text, as QueueLimitsKeeper
   * last read it; null: none stored), which `limited` and the claim's limits were chosen by. Every claim and eager insert
   * sends it, and the row refuses them while it holds something else (queueStopped in store/claim-parts.sql.ts): the
   * row owns the limits, this copy only says which claim to send.
   */
  storedLimits: string | null = null;
  readonly tell: AttemptReport;
  stopping = false;
  /** The buffer may hold jobs taken back: nothing starts from it until a beat numbered this or later answers. */
  unconfirmedUntilSeq = 0;
  /**
   * Reviews asked so far (a pause of the queue, here or heard through a notice): a start mark sent before the latest
   * one starts none of the jobs it marked (StartMarks.marked), and the armed jobs went back when it was asked
   * (LeaseAnswers.checkBuffer), so that nothing held starts after pause() returns in this process.
   */
  reviews = 0;
  /** performance.now() when a slot last freed (the review's stall sample). */
  lastFreedAt = performance.now();

  constructor(
    readonly config: QueueWorkerConfig,
    readonly shared: SharedParts,
  ) {
    const { concurrency, prefetch, batchSize, batch } = config.options;
    this.limited = hasLimits(config.options);
    // resolveHandlerOptions never leaves read-ahead on a queue whose limits refuse it; the check keeps the two in step.
    this.buffer = new JobBuffer(concurrency, refusesReadAhead(config.options) ? 0 : prefetch);
    this.startAhead = batch ? undefined : new StartAhead(concurrency);
    this.slots = new Slots(concurrency, batchSize, batch?.size);
    this.deadlines = new StartDeadlines(config.leaseMs);
    this.tell = new AttemptReport(config.queue, config.workerId, shared.logger, shared.events);
  }

  /** The job is finished with (or no longer this claim's): out of the books, unless a newer claim of it took its place. */
  forget(job: HeldJob): void {
    if (this.held.get(job.id) === job) this.held.delete(job.id);
  }

  /** A job marked started before a slot is free for it waits, in claim order, to start when one frees. */
  arm(job: HeldJob): void {
    job.to('armed');
    this.armed.push(job);
  }

  /** An `armed` job leaves (cancelled, lost, given back) before its start. */
  disarm(job: HeldJob): void {
    const i = this.armed.indexOf(job);
    if (i >= 0) this.armed.splice(i, 1);
  }

  /**
   * Puts buffered jobs (already out of the buffer) back in the queue at once, uncharged, for any instance to
   * take: in the lane, since heartbeats lock the same rows. If the database does not take them, their short
   * leases lapse and the sweeper puts them back, uncharged too.
   */
  giveBack(jobs: HeldJob[], why: string): Promise<void> {
    for (const job of jobs) {
      job.to('given-back');
      this.forget(job);
    }
    const { queue, workerId } = this.config;
    const { logger, lane, store } = this.shared;
    return lane.run(() => withTimeout(store.releaseJobs(workerId, jobs), PUT_BACK_DEADLINE_MS, 'putting jobs back')).then(
      () => logger.debug?.(HELD_JOBS_GIVEN_BACK(queue, jobs.length, why)),
      (error: unknown) => logger.warn(HELD_JOBS_NOT_GIVEN_BACK(queue, jobs.length, errorLine(error))),
    );
  }

  /** Runs a step of the worker; a defect in it is logged with its context, never thrown into the host's event loop. */
  guarded(what: string, step: () => void): void {
    try {
      step();
    } catch (error) {
      this.shared.logger.error(WORKER_DEFECT(this.config.queue, what, errorLine(error)));
    }
  }
}
