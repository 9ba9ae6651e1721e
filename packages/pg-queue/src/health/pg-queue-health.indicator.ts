import { Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { BAD_HEALTH_OPTION } from '../metrics/metrics.messages.js';
import { findQueueInternals, type QueueInternals } from '../metrics/queue-internals.js';
import { errorLine } from '../utils/error-text.js';
import { stalledInstances, unservedQueues, type InstanceRecord } from '../store/instance.store.js';
import type { ClaimLoopsCheckOptions, DatabaseCheckOptions, HealthResult, LagCheckOptions, ReadinessCheckOptions } from './health-check-options.interface.js';
import { eventLoopLag } from './event-loop-lag.js';
import { readProgress } from './progress.js';

const DEFAULT_DB_TIMEOUT_MS = 2_000;
const DEFAULT_LAG_TIMEOUT_MS = 2_000;

/**
 * Health checks of the queue in this process, as @nestjs/terminus indicators: each method resolves to
 * `{ [key]: { status: 'up' | 'down', ...details } }`, the shape terminus's HealthCheckService reads (a 'down'
 * result fails the check with 503; nothing throws). Nothing here needs terminus at run time, so the results also
 * serve an app's own health endpoint. docs/metrics.md says which check belongs to liveness and which to readiness.
 */
@Injectable()
export class PgQueueHealthIndicator implements OnModuleInit, OnModuleDestroy {
  /** One per database (PgQueueModule instance) of the app. */
  private internals!: QueueInternals[];

  constructor(private readonly moduleRef: ModuleRef) {}

  onModuleInit(): void {
    this.internals = findQueueInternals(this.moduleRef, 'PgQueueHealthModule');
    eventLoopLag.acquire();
  }

  onModuleDestroy(): void {
    eventLoopLag.release();
  }

  /** The database answers a `SELECT 1` on the queue's own pool within `timeoutMs` (default 2_000). */
  async checkDatabase<K extends string = 'pg-queue-database'>(key: K = 'pg-queue-database' as K, options: DatabaseCheckOptions = {}): Promise<HealthResult<K>> {
    const timeoutMs = positiveInt('checkDatabase', 'timeoutMs', options.timeoutMs, DEFAULT_DB_TIMEOUT_MS);
    return this.across(key, async (internals) => {
      const started = performance.now();
      try {
        await internals.store.ping(timeoutMs);
      } catch (error) {
        return detail('down', { message: `database unreachable: ${errorLine(error)}` });
      }
      return detail('up', { responseTimeMs: Math.round(performance.now() - started) });
    });
  }

  /**
   * The LISTEN connection is up (NOTIFY wakes the workers; while it is down they poll every
   * fallbackPollIntervalMs and cancel notices are missed). Up when this instance runs no workers.
   */
  async checkListener<K extends string = 'pg-queue-listener'>(key: K = 'pg-queue-listener' as K): Promise<HealthResult<K>> {
    return this.across(key, async (internals) => {
      const { workers, options } = internals;
      if (!options.workers || workers.claimLoops().length === 0) return detail('up', { workers: false });
      return workers.listening ? detail('up', { listening: true }) : detail('down', { listening: false, message: 'the LISTEN connection is down (reconnecting; workers poll meanwhile)' });
    });
  }

  /**
   * Every claim loop of this process is alive: none has ended, and none has waited on one claim longer than
   * `stuckAfterMs` (default: connectTimeoutMs + statementTimeoutMs + 10 s, past which the queue's own timeouts
   * would have ended any claim, so only a wedged process gets there).
   */
  async checkClaimLoops<K extends string = 'pg-queue-claim-loops'>(key: K = 'pg-queue-claim-loops' as K, options: ClaimLoopsCheckOptions = {}): Promise<HealthResult<K>> {
    return this.across(key, async (internals) => {
      const { connectTimeoutMs, statementTimeoutMs } = internals.options;
      const fallback = connectTimeoutMs + (statementTimeoutMs > 0 ? statementTimeoutMs : 300_000) + 10_000;
      const stuckAfterMs = positiveInt('checkClaimLoops', 'stuckAfterMs', options.stuckAfterMs, fallback);
      const loops = internals.workers.claimLoops();
      const bad = loops.filter((l) => l.ended || l.claimingForMs > stuckAfterMs);
      if (bad.length === 0) return detail('up', { loops: loops.length });
      const what = bad.map((l) => (l.ended ? `"${l.queue}" has ended` : `"${l.queue}" has waited ${Math.round(l.claimingForMs)} ms on one claim`));
      return detail('down', { loops: loops.length, message: `claim loop ${what.join(', ')} (stuckAfterMs ${stuckAfterMs})` });
    });
  }

  /**
   * Each queue's lag (how long its oldest due queued job has waited since its run_at, by the database clock) is
   * at most `maxLagMs`: one number for every queue with queued jobs, or a number per queue (the others are not
   * checked). One read of a few index pages per queue and priority, under `timeoutMs` (default 2_000).
   */
  async checkLag<K extends string = 'pg-queue-lag'>(key: K = 'pg-queue-lag' as K, options: LagCheckOptions): Promise<HealthResult<K>> {
    const limits = lagLimits(options?.maxLagMs);
    const timeoutMs = positiveInt('checkLag', 'timeoutMs', options?.timeoutMs, DEFAULT_LAG_TIMEOUT_MS);
    return this.across(key, async (internals) => {
      let lags: Record<string, number>;
      try {
        lags = await internals.store.oldestDue(timeoutMs);
      } catch (error) {
        return detail('down', { message: `lag unknown, the query failed: ${errorLine(error)}` });
      }
      const checked: Record<string, number> = {};
      const over: string[] = [];
      for (const [queue, lagMs] of Object.entries(lags)) {
        const max = typeof limits === 'number' ? limits : limits[queue];
        if (max === undefined) continue;
        checked[queue] = Math.round(lagMs);
        if (lagMs > max) over.push(`"${queue}" lags ${Math.round(lagMs)} ms (max ${max})`);
      }
      if (over.length === 0) return detail('up', { lagMs: checked });
      return detail('down', { lagMs: checked, message: `queue ${over.join(', ')}` });
    });
  }

  /**
   * Every queue with a due job is served: a live instance (the instances registry, README: "Instances") has a
   * handler for it, and no live instance has stopped claiming one of its queues with due jobs and idle slots for its
   * `health.claimStalledAfterMs` (`stalled`: alive but not claiming). A check of the whole deployment, not of this process: for a monitoring endpoint, not for
   * liveness or readiness (an instance cannot fix it by restarting). Down names the queues nobody runs. Two reads
   * under `timeoutMs` (default 2_000).
   */
  async checkInstances<K extends string = 'pg-queue-instances'>(key: K = 'pg-queue-instances' as K, options: DatabaseCheckOptions = {}): Promise<HealthResult<K>> {
    const timeoutMs = positiveInt('checkInstances', 'timeoutMs', options.timeoutMs, DEFAULT_LAG_TIMEOUT_MS);
    return this.across(key, async (internals) => {
      let oldest: Record<string, number>;
      let instances: InstanceRecord[];
      try {
        oldest = await internals.store.oldestDue(timeoutMs);
        instances = await withTimeout(internals.instances.list(), timeoutMs);
      } catch (error) {
        return detail('down', { message: `instances unknown, the query failed: ${errorLine(error)}` });
      }
      const due = Object.keys(oldest).sort();
      const live = instances.filter((i) => i.live).length;
      const unserved = unservedQueues(due, instances);
      const stalled = stalledInstances(due.filter((q) => oldest[q] > 0), instances);
      if (unserved.length === 0 && stalled.length === 0) return detail('up', { liveInstances: live });
      const messages = [
        ...(unserved.length > 0 ? [`nobody runs queue ${unserved.map((q) => `"${q}"`).join(', ')}: due jobs, and no live instance has a handler for it`] : []),
        ...stalled.map((x) => `instance ${x.id} is alive but has not claimed queue "${x.queue}" for ${x.sinceClaimMs} ms (its bound ${x.stalledAfterMs} ms), with due jobs and idle slots`),
      ];
      const stalledDetail = stalled.map((x) => ({ instance: x.id, queue: x.queue, sinceClaimMs: x.sinceClaimMs }));
      return detail('down', { liveInstances: live, ...(unserved.length > 0 && { unserved }), ...(stalled.length > 0 && { stalled: stalledDetail }), message: messages.join('; ') });
    });
  }

  /**
   * Progress of this process (README: Health): no queue it serves has due jobs, idle slots and no claim answered for
   * the module's `health.claimStalledAfterMs` (`claims`), and the event loop has not lagged past
   * `health.maxEventLoopLagMs` in the last 5 s (`eventLoop`). Reads the database (which queues have due jobs) only
   * when a claim loop has not answered for the bound, under `timeoutMs` (default 2_000). The metrics expose the same
   * reasons (`pg_queue_unready`).
   */
  async checkProgress<K extends string = 'pg-queue-progress'>(key: K = 'pg-queue-progress' as K, options: DatabaseCheckOptions = {}): Promise<HealthResult<K>> {
    const timeoutMs = positiveInt('checkProgress', 'timeoutMs', options.timeoutMs, DEFAULT_LAG_TIMEOUT_MS);
    return this.across(key, async (internals) => {
      const report = await readProgress(internals, eventLoopLag, timeoutMs);
      const stalled = report.unready.filter((u) => u.reason === 'claim-stalled');
      const lagging = report.unready.filter((u) => u.reason === 'event-loop-lag');
      const details = {
        claims: stalled.length === 0 ? 'up' : 'down',
        eventLoop: lagging.length === 0 ? 'up' : 'down',
        eventLoopLagMs: report.eventLoopLagMs,
        ...(stalled.length > 0 && { stalled: stalled.map((u) => u.queue!) }),
      };
      const down = [...stalled, ...lagging];
      return down.length === 0 ? detail('up', details) : detail('down', { ...details, message: down.map((u) => u.message).join('; ') });
    });
  }

  /**
   * A check of every database of the app: one database's result as it is; several (docs/guides/several-databases.md)
   * as `{ databases: { [name]: result } }`, down when any is, its message naming each database that is down.
   */
  private async across<K extends string>(key: K, check: (internals: QueueInternals) => Promise<Detail>): Promise<HealthResult<K>> {
    if (this.internals.length === 1) return { [key]: await check(this.internals[0]) } as HealthResult<K>;
    const results = await Promise.all(this.internals.map(check));
    const databases = Object.fromEntries(this.internals.map((internals, i) => [internals.database, results[i]]));
    const down = this.internals.filter((_, i) => results[i].status === 'down').map((internals) => `${internals.database}: ${databases[internals.database].message}`);
    return down.length === 0 ? result(key, 'up', { databases }) : result(key, 'down', { databases, message: down.join('; ') });
  }

  /** Liveness: the claim loops (checkClaimLoops); nothing that depends on the database. */
  async isAlive<K extends string = 'pg-queue'>(key: K = 'pg-queue' as K, options: ClaimLoopsCheckOptions = {}): Promise<HealthResult<K>> {
    return this.checkClaimLoops(key, options);
  }

  /**
   * Readiness: the database answers, the LISTEN connection is up, and this process makes progress (no stalled claim
   * loop, no event loop lag past the bound), as one result (checkDatabase, checkListener, checkProgress).
   */
  async isReady<K extends string = 'pg-queue'>(key: K = 'pg-queue' as K, options: ReadinessCheckOptions = {}): Promise<HealthResult<K>> {
    const [database, listener, progress] = await Promise.all([this.checkDatabase('database', options), this.checkListener('listener'), this.checkProgress('progress', options)]);
    const down = [database.database, listener.listener, progress.progress].filter((r) => r.status === 'down').map((r) => r.message as string);
    const p = progress.progress;
    const each = (field: 'claims' | 'eventLoop') => (p.databases ? (Object.values(p.databases as Record<string, Record<string, unknown>>).some((d) => d[field] === 'down') ? 'down' : 'up') : p[field]);
    const details = { database: database.database.status, listener: listener.listener.status, claims: each('claims'), eventLoop: each('eventLoop') };
    return down.length === 0 ? result(key, 'up', details) : result(key, 'down', { ...details, message: down.join('; ') });
  }
}

type Detail = { status: 'up' | 'down'; message?: string; [detail: string]: unknown };

function detail(status: 'up' | 'down', details: Record<string, unknown>): Detail {
  return { status, ...details };
}

function result<K extends string>(key: K, status: 'up' | 'down', details: Record<string, unknown>): HealthResult<K> {
  return { [key]: { status, ...details } } as HealthResult<K>;
}

function positiveInt(method: string, name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) throw new PgQueueError(BAD_HEALTH_OPTION(method, name, value, 'a positive integer (ms)'));
  return value;
}

function lagLimits(value: unknown): number | Record<string, number> {
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value;
  const ok =
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    Object.keys(value).length > 0 &&
    Object.values(value).every((v) => typeof v === 'number' && Number.isFinite(v) && v >= 0);
  if (!ok) throw new PgQueueError(BAD_HEALTH_OPTION('checkLag', 'maxLagMs', value, 'a number of ms, or { [queue]: ms }'));
  return value as Record<string, number>;
}

/** `work`, or a rejection once `ms` have passed (the pool's statement timeout may be longer than a health probe's). */
function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
