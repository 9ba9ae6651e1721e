import type { LoggerService } from '@nestjs/common';
import type * as PromClient from 'prom-client';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { JobStatus } from '../interfaces/job.interface.js';
import { emptyDepth, type DepthSnapshot, type DepthSource, type QueueDepth } from '../store/metrics.store.js';
import { errorLine } from '../utils/error-text.js';
import { DepthReader } from './depth-reader.js';
import type { JobMetricsSink } from './job-metrics-sink.interface.js';
import { DEPTH_QUERY_FAILED, METRIC_NAME_TAKEN } from './metrics.messages.js';
import type { ResolvedMetricsOptions } from './resolve-metrics-options.js';

export type PromClientModule = typeof PromClient;

const STATES: readonly JobStatus[] = ['queued', 'blocked', 'processing', 'completed', 'failed', 'cancelled'];

/** The children of one queue's series, made once: `labels()` hashes its arguments on every call. */
interface QueueSeries {
  started: PromClient.Counter.Internal;
  completed: PromClient.Counter.Internal;
  failed: PromClient.Counter.Internal;
  dead: PromClient.Counter.Internal;
  cancelled: PromClient.Counter.Internal;
  leaseLost: PromClient.Counter.Internal;
  completedDuration: PromClient.Histogram.Internal<string>;
  failedDuration: PromClient.Histogram.Internal<string>;
  claimLatency: PromClient.Histogram.Internal<string>;
}

/**
 * The Prometheus side: counters and histograms fed by JobMetricsCollector, and the depth gauges, filled from
 * one database query when a scrape collects them (DepthReader coalesces the two gauges' and concurrent
 * scrapes' reads into one). A failed depth query leaves the depth gauges out of that scrape (an absent series,
 * not a stale number) and counts the failure; the rest of the scrape is served.
 */
export class PrometheusMetrics implements JobMetricsSink {
  readonly register: PromClient.Registry;
  private readonly metrics: PromClient.Metric[] = [];
  private readonly series = new Map<string, QueueSeries>();
  private readonly counters: Record<'started' | 'completed' | 'failed' | 'dead' | 'cancelled' | 'leaseLost', PromClient.Counter<'queue'>>;
  private readonly duration: PromClient.Histogram<'queue' | 'outcome'>;
  private readonly claimLatency: PromClient.Histogram<'queue'>;
  /** Queues the depth gauges always report (0 when empty): this instance's handlers and every queue seen before. */
  private readonly knownQueues = new Set<string>();

  private readonly depth: DepthReader | undefined;

  /** `store`: the depth gauges' source; undefined leaves them out (option depth: false). */
  constructor(
    client: PromClientModule,
    options: ResolvedMetricsOptions,
    store: DepthSource | undefined,
    private readonly logger: LoggerService,
  ) {
    this.register = options.register ?? client.register;
    const p = options.prefix;
    const counter = (name: string, help: string) => this.add(new client.Counter({ name: p + name, help, labelNames: ['queue'], registers: [] }));
    this.counters = {
      started: counter('jobs_started_total', 'Attempts started (handler called) by this instance.'),
      completed: counter('jobs_completed_total', 'Attempts whose success was written, by this instance.'),
      failed: counter('jobs_failed_total', 'Failed attempts written by this instance (retried or not).'),
      dead: counter('jobs_dead_total', 'Jobs whose last attempt failed on this instance (dead-lettered: status failed).'),
      cancelled: counter('jobs_cancelled_total', 'Jobs cancelled while their handler ran on this instance.'),
      leaseLost: counter('lease_lost_total', 'Attempts on this instance whose job was taken back while running (lease ran out).'),
    };
    this.duration = this.add(
      new client.Histogram({
        name: `${p}job_duration_seconds`,
        help: 'Handler run time of attempts on this instance, by outcome (completed, failed).',
        labelNames: ['queue', 'outcome'],
        buckets: options.durationBuckets,
        registers: [],
      }),
    );
    this.claimLatency = this.add(
      new client.Histogram({
        name: `${p}claim_latency_seconds`,
        help: 'Time from a job being due (run_at) to its claim by this instance, by the database clock.',
        labelNames: ['queue'],
        buckets: options.claimLatencyBuckets,
        registers: [],
      }),
    );
    if (store) {
      // Collected after the scrape's depth read (shared with the gauges below), so they tell of this scrape's query.
      const afterRead = async () => void (await this.depth!.read().catch(() => undefined));
      const failures = this.add(
        new client.Counter({ name: `${p}depth_query_failures_total`, help: 'Depth queries that failed (those scrapes had no depth gauges).', registers: [], collect: afterRead }),
      );
      const took = this.add(
        new client.Gauge({ name: `${p}depth_query_seconds`, help: 'How long the last depth query took: the database cost of a scrape.', registers: [], collect: afterRead }),
      );
      this.depth = new DepthReader(store, {
        cacheMs: options.depthCacheMs,
        exactLimit: options.depthExactLimit,
        timeoutMs: options.depthTimeoutMs,
        queried: (ms) => took.set(ms / 1000),
        failed: (error) => {
          failures.inc();
          this.logger.warn(DEPTH_QUERY_FAILED(errorLine(error)));
        },
      });
      const jobs: PromClient.Gauge<'queue' | 'state'> = this.add(
        new client.Gauge({
          name: `${p}jobs`,
          help: `Jobs in the table by queue and state (every instance reports the same; exact up to ${options.depthExactLimit} per queue and state, estimated above).`,
          labelNames: ['queue', 'state'],
          registers: [],
          // Arrow functions: prom-client calls collect() with the gauge as `this`.
          collect: () =>
            this.collectDepth(jobs, (queue, d) => {
              for (const state of STATES) jobs.set({ queue, state }, d.counts[state]);
            }),
        }),
      );
      const oldest: PromClient.Gauge<'queue'> = this.add(
        new client.Gauge({
          name: `${p}oldest_due_job_age_seconds`,
          help: "Age of the queue's oldest due queued job: now minus its run_at (0 when none is due), by the database clock.",
          labelNames: ['queue'],
          registers: [],
          collect: () => this.collectDepth(oldest, (queue, d) => oldest.set({ queue }, d.oldestDueMs / 1000)),
        }),
      );
    }
  }

  /** Metrics built elsewhere (the progress gauges), registered with the rest by registerAll. */
  addMetrics(metrics: readonly PromClient.Metric[]): void {
    for (const metric of metrics) this.add(metric);
  }

  /** Registers every metric; a name the registry already has fails the boot with the way out. */
  registerAll(): void {
    for (const metric of this.metrics) {
      const name = nameOf(metric);
      if (this.register.getSingleMetric(name)) throw new PgQueueError(METRIC_NAME_TAKEN(name, 'registered by something else in this app'));
    }
    for (const metric of this.metrics) this.register.registerMetric(metric);
  }

  /** Queues whose series exist from now on (at 0 until a job runs) and whose depth is always reported. */
  addQueues(queues: Iterable<string>): void {
    for (const queue of queues) {
      this.knownQueues.add(queue);
      this.of(queue);
    }
  }

  /** Takes the metrics out of the registry (shutdown): an app built again in the same process registers them anew. */
  unregisterAll(): void {
    for (const metric of this.metrics) this.register.removeSingleMetric(nameOf(metric));
  }

  /** The registry's text and its content type, as GET /metrics serves them. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.register.contentType, body: await this.register.metrics() };
  }

  started(queue: string, claimLatencyMs: number | undefined): void {
    const s = this.of(queue);
    s.started.inc();
    if (claimLatencyMs !== undefined) s.claimLatency.observe(Math.max(0, claimLatencyMs) / 1000);
  }

  finished(queue: string, outcome: 'completed' | 'failed', durationMs: number): void {
    const s = this.of(queue);
    if (outcome === 'completed') {
      s.completed.inc();
      s.completedDuration.observe(durationMs / 1000);
    } else {
      s.failed.inc();
      s.failedDuration.observe(durationMs / 1000);
    }
  }

  dead(queue: string): void {
    this.of(queue).dead.inc();
  }

  cancelled(queue: string): void {
    this.of(queue).cancelled.inc();
  }

  leaseLost(queue: string): void {
    this.of(queue).leaseLost.inc();
  }

  private of(queue: string): QueueSeries {
    let s = this.series.get(queue);
    if (!s) {
      const c = this.counters;
      s = {
        started: c.started.labels(queue),
        completed: c.completed.labels(queue),
        failed: c.failed.labels(queue),
        dead: c.dead.labels(queue),
        cancelled: c.cancelled.labels(queue),
        leaseLost: c.leaseLost.labels(queue),
        completedDuration: this.duration.labels(queue, 'completed'),
        failedDuration: this.duration.labels(queue, 'failed'),
        claimLatency: this.claimLatency.labels(queue),
      };
      for (const counter of [s.started, s.completed, s.failed, s.dead, s.cancelled, s.leaseLost]) counter.inc(0);
      this.series.set(queue, s);
    }
    return s;
  }

  private async collectDepth(gauge: PromClient.Gauge<string>, fill: (queue: string, depth: QueueDepth) => void): Promise<void> {
    gauge.reset();
    let snapshot: DepthSnapshot;
    try {
      snapshot = await this.depth!.read();
    } catch {
      return; // counted and logged once per query by the reader
    }
    for (const queue of Object.keys(snapshot.queues)) this.knownQueues.add(queue);
    for (const queue of this.knownQueues) fill(queue, snapshot.queues[queue] ?? emptyDepth());
  }

  private add<M extends PromClient.Metric>(metric: M): M {
    this.metrics.push(metric);
    return metric;
  }
}

function nameOf(metric: PromClient.Metric): string {
  return (metric as unknown as { name: string }).name;
}
