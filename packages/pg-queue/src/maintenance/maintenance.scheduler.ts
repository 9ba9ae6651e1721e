import { Inject, Injectable, Optional, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { UNSCHEDULED_APP_METHODS } from '../pg-queue.messages.js';
import { MAINTENANCE_JOB_STORE } from '../pg-queue.constants.js';
import { RESOLVED_OPTIONS } from '../pg-queue.constants.js';
import { JobStore } from '../store/job.store.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import { RetryBackoff } from '../utils/retry-backoff.js';
import { HistoryMover } from './history-mover.js';
import { Pruner } from './pruner.js';
import { Sweeper } from './sweeper.js';
import { scheduledMethods } from './unscheduled-methods.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';

/**
 * Registers the sweeper and the pruner as @nestjs/schedule intervals, named from the options at runtime
 * (so they show in SchedulerRegistry next to the app's own jobs). The registry is the app's when it
 * imports ScheduleModule.forRoot() (global), else one of our own: the module never imports ScheduleModule,
 * whose second explorer would run the app's @Cron / @Interval methods twice. A pass that fails is logged
 * once per outage and skipped for a growing backoff; a pass never overlaps the previous one.
 */
@Injectable()
export class MaintenanceScheduler implements OnApplicationBootstrap, BeforeApplicationShutdown {
  static readonly SWEEP = 'pg-queue:sweeper';
  static readonly PRUNE = 'pg-queue:pruner';
  static readonly MOVE = 'pg-queue:history-mover';
  private readonly logger = new PgQueueLogger('PgQueue');
  readonly sweeper: Sweeper;
  readonly pruner: Pruner;
  /** Present when maintenance.history is on. */
  readonly historyMover: HistoryMover | undefined;
  private readonly registered: string[] = [];
  private readonly schedulerRegistry: SchedulerRegistry;
  private readonly ownRegistry: boolean;
  /** Aborted at shutdown: the pruner stops between batches. */
  private readonly stopping = new AbortController();
  /** Passes in progress, awaited at shutdown so none queries the pool after it is closed. */
  private readonly running = new Set<Promise<void>>();

  constructor(
    /** The store on the maintenance pool: a pass never waits for a connection behind the app's calls or the workers. */
    @Inject(MAINTENANCE_JOB_STORE) store: JobStore,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedModuleOptions,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    @Optional() appSchedulerRegistry?: SchedulerRegistry,
  ) {
    this.ownRegistry = !appSchedulerRegistry;
    this.schedulerRegistry = appSchedulerRegistry ?? new SchedulerRegistry();
    const m = options.maintenance;
    this.sweeper = new Sweeper(store, this.logger);
    this.pruner = new Pruner(
      store,
      { completedRetentionMs: m.completedRetentionMs, failedRetentionMs: m.failedRetentionMs, eventRetentionMs: m.eventRetentionMs, batchSize: m.pruneBatchSize, maxBatchesPerPass: 100 },
      this.logger,
      store.history,
    );
    this.historyMover = m.history
      ? new HistoryMover(
          store.history,
          {
            partitionWidth: m.history.partitionWidth,
            moveAfterMs: m.history.moveAfterMs,
            batchSize: m.history.moveBatchSize,
            maxBatchesPerPass: 100,
            completedRetentionMs: m.completedRetentionMs,
            failedRetentionMs: m.failedRetentionMs,
          },
          this.logger,
        )
      : undefined;
  }

  onApplicationBootstrap(): void {
    if (this.ownRegistry) {
      // Apps whose @Cron/@Interval ran only because this module used to import ScheduleModule.forRoot().
      const unscheduled = scheduledMethods(this.discovery, this.scanner, this.reflector);
      if (unscheduled.length > 0) this.logger.warn(UNSCHEDULED_APP_METHODS(unscheduled));
    }
    const m = this.options.maintenance;
    if (!m.enabled) return;
    this.schedule(MaintenanceScheduler.SWEEP, m.sweepIntervalMs, () => this.sweeper.runOnce(), 'sweeper');
    this.schedule(MaintenanceScheduler.PRUNE, m.pruneIntervalMs, () => this.pruner.runOnce(this.stopping.signal), 'pruner');
    const mover = this.historyMover;
    if (mover && m.history) this.schedule(MaintenanceScheduler.MOVE, m.history.moveIntervalMs, () => mover.runOnce(this.stopping.signal), 'history mover');
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping.abort();
    // ScheduleModule may have cleared its registry already (its own shutdown hook can run first).
    for (const name of this.registered.splice(0)) {
      if (this.schedulerRegistry.doesExist('interval', name)) this.schedulerRegistry.deleteInterval(name);
    }
    // The queue's pool closes right after this hook; a pass still querying then would fail.
    if (this.running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.options.shutdownGraceMs)));
    await Promise.race([Promise.all(this.running), grace]);
    clearTimeout(timer);
  }

  private schedule(baseName: string, everyMs: number, pass: () => Promise<unknown>, what: string): void {
    // Several PgQueueModule instances (tests, multi-tenant apps) may share one registry.
    let name = baseName;
    for (let i = 2; this.schedulerRegistry.doesExist('interval', name); i++) name = `${baseName}#${i}`;
    const backoff = new RetryBackoff(what, this.logger, everyMs, 60_000);
    let busy = false;
    let skipUntil = 0;
    const tick = async () => {
      if (busy || Date.now() < skipUntil || this.stopping.signal.aborted) return;
      busy = true;
      try {
        await pass();
        backoff.succeeded();
      } catch (error) {
        skipUntil = Date.now() + backoff.failed(error);
      } finally {
        busy = false;
      }
    };
    const run = () => {
      const running = tick();
      this.running.add(running);
      void running.finally(() => this.running.delete(running));
    };
    this.schedulerRegistry.addInterval(name, setInterval(run, everyMs));
    this.registered.push(name);
  }
}
