import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import { JobAbortedError } from '../errors/pg-queue.error.js';
import { JobEvents } from '../events/job-events.js';
import { PgQueueConnection } from '../connection/pg-queue-connection.js';
import { RESOLVED_OPTIONS } from '../pg-queue.module-definition.js';
import { JobStore } from '../store/job.store.js';
import { traceHandler } from '../tracing/consumer-span.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import { withDeadline } from '../utils/retry-backoff.js';
import { LeaseKeeper } from './lease-keeper.js';
import { NotificationListener } from './notification-listener.js';
import { OutcomeWriter } from './outcome-writer.js';
import { putBack } from './put-back.js';
import { QueueWorker } from './queue-worker.js';
import { RowLockLane } from './row-lock-lane.js';

/**
 * Orchestration: mounts one QueueWorker per discovered handler at bootstrap, shares one LISTEN connection,
 * one heartbeat and one outcome writer between them, and drains them at shutdown.
 */
@Injectable()
export class WorkerPool implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('PgQueue');
  private readonly workers = new Map<string, QueueWorker>();
  private listener: NotificationListener | undefined;
  private leases: LeaseKeeper | undefined;
  private outcomes: OutcomeWriter | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private pollEveryMs = 0;
  private shuttingDown = false;

  constructor(
    private readonly registry: JobHandlerRegistry,
    private readonly store: JobStore,
    private readonly connection: PgQueueConnection,
    private readonly events: JobEvents,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  get workerId(): string {
    return this.options.workerId;
  }

  /** True while the LISTEN connection is up (NOTIFY wakes the workers; otherwise they poll). */
  get listening(): boolean {
    return this.listener?.connected ?? false;
  }

  /** Each queue's claim loop (health checks): how long its claim in flight has waited, and whether it has ended. */
  claimLoops(): { queue: string; claimingForMs: number; ended: boolean }[] {
    return [...this.workers].map(([queue, w]) => ({ queue, ...w.claimLoopState }));
  }

  /** Jobs running in this process, per queue. */
  activeCounts(): Record<string, number> {
    return Object.fromEntries([...this.workers].map(([queue, w]) => [queue, w.activeCount]));
  }

  onApplicationBootstrap(): void {
    const handlers = this.registry.all();
    if (!this.options.workers || handlers.length === 0) return;
    const { workerId, leaseMs, heartbeatMs } = this.options;
    const lane = new RowLockLane();
    this.leases = new LeaseKeeper(this.store, workerId, leaseMs, heartbeatMs, this.logger, lane);
    this.outcomes = new OutcomeWriter(this.store, workerId, this.logger, lane, this.options.maintenance.completedRetentionMs === 0);
    for (const h of handlers) {
      const worker = new QueueWorker(
        { queue: h.queue, handlerName: h.name, workerId, leaseMs, options: h.options, handle: traceHandler(h.queue, workerId, h.handle), maxResultBytes: this.options.maxResultBytes },
        this.store,
        this.leases,
        this.outcomes,
        this.logger,
        this.events,
        lane,
      );
      this.workers.set(h.queue, worker);
    }
    this.listener = new NotificationListener(
      this.connection.listenerConfig,
      {
        onJobs: (queue) => this.workers.get(queue)?.wake(),
        onCancel: (jobId, token) => this.abortCancelled(jobId, token),
        onUp: () => {
          this.setPoll(this.options.pollIntervalMs);
          this.wakeAll();
        },
        onDown: () => this.setPoll(this.options.fallbackPollIntervalMs),
      },
      this.logger,
    );
    this.setPoll(this.options.fallbackPollIntervalMs); // until LISTEN is up
    this.leases.start();
    this.listener.start();
    for (const worker of this.workers.values()) worker.start();
    this.logger.log(`worker ${workerId} processing ${handlers.map((h) => `${h.queue} (x${h.options.concurrency})`).join(', ')}`);
  }

  /**
   * Graceful drain: stop claiming, give running jobs shutdownGraceMs to finish and their outcomes time
   * to be written, then abort the rest and put them back in the queue (the attempt is not counted).
   */
  async beforeApplicationShutdown(): Promise<void> {
    if (this.workers.size === 0) return;
    this.shuttingDown = true; // from here on, a LISTEN reconnect must not re-arm the poll
    clearInterval(this.pollTimer);
    const workers = [...this.workers.values()];
    await Promise.all(workers.map((w) => w.stopClaiming()));
    const deadline = Date.now() + this.options.shutdownGraceMs;
    await Promise.all(workers.map((w) => w.drain(this.options.shutdownGraceMs)));
    const left = workers.map((w) => w.abandonAll());
    const aborted = left.flatMap((l) => l.aborted);
    const unstarted = left.flatMap((l) => l.unstarted);
    await withDeadline(this.outcomes!.drain(), Math.max(1_000, deadline - Date.now()));
    this.outcomes!.close();
    const abandoned = [...aborted, ...unstarted];
    if (abandoned.length > 0) {
      const what = [
        aborted.length ? `${aborted.length} job(s) still running after ${this.options.shutdownGraceMs} ms were aborted` : '',
        unstarted.length ? `${unstarted.length} prefetched job(s) never started` : '',
      ].filter(Boolean).join(', ');
      const released = await putBack(this.store, this.options.workerId, abandoned, `(${what})`, this.logger);
      if (released > 0) this.logger[aborted.length ? 'warn' : 'log'](`shutdown: ${what}; ${released} put back in the queue`);
    }
    this.leases!.stop();
    await this.listener!.close();
    this.workers.clear();
  }

  private abortCancelled(jobId: string, token: string | undefined): void {
    for (const worker of this.workers.values()) {
      if (worker.abort(jobId, token, new JobAbortedError('job was cancelled'))) {
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
}

