import { flowAccess } from '../flows/flow-access.js';
import { Inject, Injectable, Logger, Optional, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { JobHandlerRegistry, type RegisteredHandler } from '../discovery/job-handler.registry.js';
import { JobAbortedError } from '../errors/pg-queue.error.js';
import type { Job } from '../interfaces/job.interface.js';
import { transactionalHandle } from './transactional-attempt.js';
import { JobEvents } from '../events/job-events.js';
import { PgQueueConnection } from '../connection/pg-queue-connection.js';
import { LEASE_JOB_STORE } from '../pg-queue.constants.js';
import { RESOLVED_OPTIONS } from '../pg-queue.constants.js';
import { JobStore } from '../store/job.store.js';
import { traceBatchHandler, traceHandler } from '../tracing/consumer-span.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import { errorLine } from '../utils/error-text.js';
import { withDeadline } from '../utils/retry-backoff.js';
import type { HeldJob } from './held-job.js';
import { LeaseKeeper, type BeatLoad, type LeaseHolders } from './lease-keeper.js';
import { NotificationListener } from './notification-listener.js';
import { OutcomeWriter, type OutcomeSink, type WrittenStatus } from './outcome-writer.js';
import { InstanceRegistration } from '../instances/instance-registration.js';
import type { InstanceQueue } from '../store/instance.store.js';
import { putBack } from './put-back.js';
import { QueueWorker } from './queue-worker.js';
import { QueueLimitsKeeper, type KeptQueue } from './queue-limits-keeper.js';
import type { ClaimLoopState } from './claim-loop.js';
import { RowLockLane } from './row-lock-lane.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';

/** One queue's claim loop as health checks and the instance's row read it (WorkerPool.claimLoops). */
export type ClaimLoopReport = ClaimLoopState & { queue: string; idleSlots: number };

/** How long the boot waits for the first read of its queues' limits before the claims start anyway. */
const FIRST_LIMITS_READ_MS = 2_000;

/** How long after its own pause a process takes a pause notice of that queue for its echo. */
const OWN_REVIEW_ECHO_MS = 5_000;

/**
 * Orchestration: mounts one QueueWorker per discovered handler at bootstrap, shares one LISTEN connection, one
 * heartbeat and one outcome writer between them, routes what comes back (written outcomes, heartbeat answers,
 * notices) to the workers as batches, and drains them at shutdown.
 */
@Injectable()
export class WorkerPool implements OnApplicationBootstrap, BeforeApplicationShutdown, LeaseHolders, OutcomeSink<HeldJob> {
  /** When this process last reviewed a queue itself (a pause made here): its own NOTIFY, heard next, is not another. */
  private readonly ownReviewAt = new Map<string, number>();

  private readonly logger: Logger = new PgQueueLogger('PgQueue');
  private readonly workers = new Map<string, QueueWorker>();
  private listener: NotificationListener | undefined;
  private leases: LeaseKeeper | undefined;
  private outcomes: OutcomeWriter<HeldJob> | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private pollEveryMs = 0;
  private shuttingDown = false;
  private registration: InstanceRegistration | undefined;
  /** The queues' limits as their rows say, read again on notices and every half second (QueueLimitsKeeper). */
  private limits: QueueLimitsKeeper | undefined;
  /** The first read of the queues' limits has answered (or failed): the claim loops run from then on. */
  private limitsRead = false;

  /**
   * The store on the leases pool: heartbeats, outcomes, put-backs, claims, the instance's registration. Never the
   * API pool, whose connections the app's calls may hold while they wait on the app's locks (issue 39 item 5).
   */
  private readonly store: JobStore;

  constructor(
    private readonly registry: JobHandlerRegistry,
    /** The store on the API pool: what handlers ask through their Job (steps, flow reads; a spawn's children are written with its completion, on the leases pool). */
    private readonly apiStore: JobStore,
    private readonly connection: PgQueueConnection,
    private readonly events: JobEvents,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedModuleOptions,
    @Optional() @Inject(LEASE_JOB_STORE) leaseStore?: JobStore,
  ) {
    this.store = leaseStore ?? apiStore;
  }

  /** A transactional handler's method, run in a transaction of the app's DataSource (worker/transactional-attempt.ts). */
  private inTransaction(h: RegisteredHandler): (job: Job) => Promise<unknown> {
    // Present: discovery refuses a transactional handler in a module without one (TRANSACTIONAL_WITHOUT_DATA_SOURCE).
    const dataSource = this.connection.appDataSource!;
    const deps = { dataSource, store: this.store, workerId: this.options.workerId, maxResultBytes: this.options.maxResultBytes, deleteCompleted: this.options.maintenance.completedRetentionMs === 0 };
    return transactionalHandle(h.handle, deps, (job, committed) => ((job as HeldJob).committed = committed));
  }

  get workerId(): string {
    return this.options.workerId;
  }

  /** True while the LISTEN connection is up (NOTIFY wakes the workers; otherwise they poll). */
  get listening(): boolean {
    return this.listener?.connected ?? false;
  }

  /** Each queue's claim loop (health checks): its claim in flight, its last answer, a limit's hold, its idle slots. */
  claimLoops(): ClaimLoopReport[] {
    return [...this.workers].map(([queue, w]) => ({ queue, ...w.claimLoopState }));
  }

  /** The queue's worker here, if it may take a job of this process's enqueue at once (QueueWorker.eagerSlotFree). */
  eagerWorker(queue: string): QueueWorker | undefined {
    const worker = this.workers.get(queue);
    return worker !== undefined && this.limitsRead && !this.shuttingDown && worker.eagerSlotFree ? worker : undefined;
  }

  /** Jobs running in this process, per queue (jobs read ahead and not started are not counted). */
  activeCounts(): Record<string, number> {
    return Object.fromEntries([...this.workers].map(([queue, w]) => [queue, w.activeCount]));
  }

  /**
   * The queue was paused (or its buffered jobs rewritten) by this process: its worker starts nothing from its
   * buffer until a heartbeat has checked it, at once, without waiting for the NOTIFY that tells other instances.
   */
  checkBuffer(queue: string): void {
    this.ownReviewAt.set(queue, performance.now());
    this.review(queue, true);
  }

  /** The worker of `queue` checks its buffer; `review`: a pause's review too (LeaseAnswers.checkBuffer). */
  private review(queue: string, review: boolean): void {
    this.guarded(`checking the buffer of queue "${queue}"`, () => this.workers.get(queue)?.checkBuffer(review));
  }

  /**
   * A pause notice (REVIEW_CHANNEL). The echo of this process's own pause, which reviewed its worker already, is only a
   * check: as a review it came after a resume had followed the pause and sent back the jobs of a claim made since.
   */
  private reviewHeard(queue: string): void {
    const own = this.ownReviewAt.get(queue);
    const echo = own !== undefined && performance.now() - own < OWN_REVIEW_ECHO_MS;
    if (echo) this.ownReviewAt.delete(queue);
    // Another process's pause is a review here; it is not one of ours, so it does not make the next notice an echo.
    this.review(queue, !echo);
  }

  async onApplicationBootstrap(): Promise<void> {
    const handlers = this.registry.all();
    if (!this.options.workers || handlers.length === 0) return;
    const { workerId, leaseMs, heartbeatMs } = this.options;
    const lane = new RowLockLane();
    const leases = (this.leases = new LeaseKeeper(this.store, workerId, leaseMs, heartbeatMs, this.logger, lane, this));
    this.outcomes = new OutcomeWriter<HeldJob>(this.store, workerId, this.logger, lane, this, this.options.maintenance.completedRetentionMs === 0, undefined, {
      wanted: () => this.events.observed,
      finished: (job, flow) => this.events.emit({ name: 'flow-finished', job, workerId, durationMs: 0, flow }),
    });
    const services = {
      flows: flowAccess(this.apiStore.flows, this.options, this.registry),
      steps: { store: this.apiStore.steps, workerId, maxResultBytes: this.options.maxResultBytes },
      logs: this.options.jobLogs,
    };
    const rateLimits = { rateLimited: (...a: Parameters<QueueLimitsKeeper['rateLimited']>) => this.limits?.rateLimited(...a), succeeded: (queue: string) => this.limits?.succeeded(queue) };
    const shared = { store: this.store, outcomes: this.outcomes, lane, logger: this.logger, events: this.events, leases, services, rateLimits };
    for (const h of handlers) {
      const handle = h.options.transactional ? this.inTransaction(h) : h.handle;
      const config = {
        queue: h.queue,
        handlerName: h.name,
        workerId,
        leaseMs,
        options: h.options,
        handle: traceHandler(h.queue, workerId, handle),
        handleBatch: h.handleBatch && traceBatchHandler(h.queue, workerId, h.handleBatch),
        maxResultBytes: this.options.maxResultBytes,
      };
      this.workers.set(h.queue, new QueueWorker(config, shared));
    }
    const kept = new Map<string, KeptQueue>();
    for (const h of handlers) {
      const { concurrency, globalConcurrency, rateLimit, concurrencyPerKey } = h.options;
      kept.set(h.queue, { defaults: { concurrency, globalConcurrency, rateLimit, concurrencyPerKey }, worker: this.workers.get(h.queue)! });
    }
    this.limits = new QueueLimitsKeeper(this.store, kept, this.logger, (queue) => this.checkBuffer(queue));
    this.listener = new NotificationListener(
      this.connection.listenerConfig,
      {
        onJobs: (queue) => this.workers.get(queue)?.wake(),
        onCancel: (jobId, token) => this.cancelled(jobId, token),
        onReview: (queue) => this.reviewHeard(queue),
        onLimits: (queue) => this.workers.has(queue) && this.limits?.read(),
        onUp: () => {
          this.limits?.read(); // a change sent while LISTEN was down was missed
          this.setPoll(this.options.pollIntervalMs);
          this.wakeAll();
        },
        onDown: () => this.setPoll(this.options.fallbackPollIntervalMs),
      },
      this.logger,
    );
    this.setPoll(this.options.fallbackPollIntervalMs); // until LISTEN is up
    leases.start();
    this.listener.start();
    // The claims start once the queues' rows were read (or the read failed: then on the decorators' limits), so that a
    // process joining after a change never claims on the decorator's limits first; the boot waits for that read (one
    // round trip), at most FIRST_LIMITS_READ_MS (a database that slow serves no claim either). Eager starts wait too.
    await withDeadline(this.limits.start(), FIRST_LIMITS_READ_MS);
    if (this.shuttingDown) return;
    this.limitsRead = true;
    for (const worker of this.workers.values()) worker.start();
    const registered = new Map(handlers.map((h) => [h.queue, registeredQueue(h.queue, h.options)]));
    const stalledAfterMs = this.options.health.claimStalledAfterMs;
    const queues = () =>
      [...this.workers].map(([queue, w]) => {
        const loop = w.claimLoopState;
        const progress = { sinceClaimMs: Math.round(loop.sinceAnswerMs), idleSlots: loop.idleSlots, claimHeld: loop.held, stalledAfterMs };
        // The limits in force (changed at runtime: QueueLimitsKeeper), which whyNotRunning reads from the registration.
        const inForce = this.limits?.inForce(queue);
        return { ...(inForce ? registeredQueue(queue, inForce) : registered.get(queue)!), running: w.activeCount, ...progress };
      });
    this.registration = new InstanceRegistration(this.store.instances, workerId, heartbeatMs, leaseMs + heartbeatMs, queues, this.logger);
    this.registration.start();
    this.logger.log(`worker ${workerId} processing ${handlers.map((h) => `${h.queue} (x${h.options.concurrency})`).join(', ')}`);
  }

  /**
   * Graceful drain: stop claiming and put every buffer back at once, give running jobs shutdownGraceMs to
   * finish and their outcomes time to be written, then abort the rest and put them back in the queue (the
   * attempt is not counted).
   */
  async beforeApplicationShutdown(): Promise<void> {
    if (this.workers.size === 0) return;
    this.shuttingDown = true; // from here on, a LISTEN reconnect must not re-arm the poll
    clearInterval(this.pollTimer);
    const workers = [...this.workers.values()];
    const deadline = Date.now() + this.options.shutdownGraceMs;
    await Promise.all(workers.map((w) => w.stopClaiming()));
    await Promise.all(workers.map((w) => w.drain(Math.max(0, deadline - Date.now()))));
    const aborted = workers.flatMap((w) => w.abandonAll());
    await withDeadline(this.outcomes!.drain(), Math.max(1_000, deadline - Date.now()));
    this.outcomes!.close();
    if (aborted.length > 0) {
      const what = `${aborted.length} job(s) still running after ${this.options.shutdownGraceMs} ms were aborted`;
      const released = await putBack(this.store, this.options.workerId, aborted, `(${what})`, this.logger);
      if (released > 0) this.logger.warn(`shutdown: ${what}; ${released} put back in the queue`);
    }
    this.leases!.stop();
    await this.limits?.stop();
    await this.listener!.close();
    await this.registration?.stop();
    this.workers.clear();
  }

  // ---- LeaseHolders: the heartbeat's load and answers ----

  collect(full: boolean, load: BeatLoad): void {
    for (const worker of this.workers.values()) worker.collect(full, load);
  }

  answered(load: BeatLoad, kept: Set<string>, seq: number): void {
    for (const worker of this.workers.values()) worker.beatAnswered(load, kept, seq);
  }

  failed(): void {
    for (const worker of this.workers.values()) worker.distrust();
  }

  // ---- OutcomeSink: the outcome writer's answers ----

  written(batch: readonly HeldJob[], statusOf: (job: HeldJob) => WrittenStatus): void {
    // A batch mixes queues; each worker takes its own jobs (it ignores the others: they are not in its books).
    if (this.workers.size === 1) {
      for (const worker of this.workers.values()) worker.written(batch, statusOf);
      return;
    }
    const byQueue = new Map<string, HeldJob[]>();
    for (const job of batch) {
      const list = byQueue.get(job.queue);
      if (list) list.push(job);
      else byQueue.set(job.queue, [job]);
    }
    for (const [queue, jobs] of byQueue) this.workers.get(queue)?.written(jobs, statusOf);
  }

  unreachable(): void {
    for (const worker of this.workers.values()) worker.checkBuffer();
  }

  // ---- Notices ----

  private cancelled(jobId: string, token: string | undefined): void {
    for (const worker of this.workers.values()) {
      if (worker.cancelled(jobId, token, new JobAbortedError('job was cancelled'))) {
        this.logger.log(`job ${jobId} (${worker.queue}) was cancelled while running; its signal is aborted`);
      }
    }
  }

  private wakeAll(): void {
    for (const worker of this.workers.values()) worker.wake();
  }

  private setPoll(ms: number): void {
    if (this.shuttingDown || ms === this.pollEveryMs) return;
    clearInterval(this.pollTimer);
    this.pollEveryMs = ms;
    this.pollTimer = setInterval(() => this.wakeAll(), ms);
  }

  private guarded(what: string, step: () => void): void {
    try {
      step();
    } catch (error) {
      this.logger.error(`${what}: ${errorLine(error)}`);
    }
  }
}

/** A queue as this instance registers it: its concurrency, and its limits across instances (whyNotRunning reads them). */
function registeredQueue(queue: string, options: Pick<RegisteredHandler['options'], 'concurrency' | 'globalConcurrency' | 'rateLimit' | 'concurrencyPerKey'>): Omit<InstanceQueue, 'running'> {
  const { globalConcurrency, rateLimit, concurrencyPerKey } = options;
  const limits = {
    ...(globalConcurrency !== undefined && { globalConcurrency }),
    ...(rateLimit !== undefined && { rateLimit: { max: rateLimit.max, intervalMs: rateLimit.intervalMs } }),
    ...(concurrencyPerKey !== undefined && { concurrencyPerKey }),
  };
  return { queue, concurrency: options.concurrency, ...(Object.keys(limits).length > 0 && { limits }) };
}
