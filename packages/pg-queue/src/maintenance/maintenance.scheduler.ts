import { Inject, Injectable, Logger, Optional, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { RESOLVED_OPTIONS } from '../pg-queue.module-definition.js';
import { JobStore } from '../store/job.store.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import { RetryBackoff } from '../utils/retry-backoff.js';
import { Pruner } from './pruner.js';
import { Sweeper } from './sweeper.js';

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
  private readonly logger = new Logger('PgQueue');
  readonly sweeper: Sweeper;
  readonly pruner: Pruner;
  private readonly registered: string[] = [];
  private readonly schedulerRegistry: SchedulerRegistry;

  constructor(
    store: JobStore,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedModuleOptions,
    @Optional() appSchedulerRegistry?: SchedulerRegistry,
  ) {
    this.schedulerRegistry = appSchedulerRegistry ?? new SchedulerRegistry();
    const m = options.maintenance;
    this.sweeper = new Sweeper(store, this.logger);
    this.pruner = new Pruner(
      store,
      { completedRetentionMs: m.completedRetentionMs, failedRetentionMs: m.failedRetentionMs, batchSize: m.pruneBatchSize, maxBatchesPerPass: 100 },
      this.logger,
    );
  }

  onApplicationBootstrap(): void {
    const m = this.options.maintenance;
    if (!m.enabled) return;
    this.schedule(MaintenanceScheduler.SWEEP, m.sweepIntervalMs, () => this.sweeper.runOnce(), 'sweeper');
    this.schedule(MaintenanceScheduler.PRUNE, m.pruneIntervalMs, () => this.pruner.runOnce(), 'pruner');
  }

  beforeApplicationShutdown(): void {
    // ScheduleModule may have cleared its registry already (its own shutdown hook can run first).
    for (const name of this.registered.splice(0)) {
      if (this.schedulerRegistry.doesExist('interval', name)) this.schedulerRegistry.deleteInterval(name);
    }
  }

  private schedule(baseName: string, everyMs: number, pass: () => Promise<unknown>, what: string): void {
    // Several PgQueueModule instances (tests, multi-tenant apps) may share one registry.
    let name = baseName;
    for (let i = 2; this.schedulerRegistry.doesExist('interval', name); i++) name = `${baseName}#${i}`;
    const backoff = new RetryBackoff(what, this.logger, everyMs, 60_000);
    let busy = false;
    let skipUntil = 0;
    const tick = async () => {
      if (busy || Date.now() < skipUntil) return;
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
    this.schedulerRegistry.addInterval(name, setInterval(() => void tick(), everyMs));
    this.registered.push(name);
  }
}
