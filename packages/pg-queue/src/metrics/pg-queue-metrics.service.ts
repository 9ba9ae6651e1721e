import { Inject, Injectable, NotFoundException, type OnApplicationBootstrap, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { JobMetricsCollector } from './job-metrics.collector.js';
import type { JobMetricsSink } from './job-metrics-sink.interface.js';
import { METRICS_PEERS, RESOLVED_METRICS_OPTIONS, type MetricsPeers } from './metrics.constants.js';
import { OTEL_API_MISSING, PROMETHEUS_OFF } from './metrics.messages.js';
import { OtelMetrics } from './otel-metrics.js';
import { PrometheusMetrics } from './prometheus-metrics.js';
import { findQueueInternals, type QueueInternals } from './queue-internals.js';
import { depthOfAll } from '../store/metrics.store.js';
import type { ResolvedMetricsOptions } from './resolve-metrics-options.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';
import { eventLoopLag } from '../health/event-loop-lag.js';
import { readProgress } from '../health/progress.js';
import { mergeProgress, progressGauges } from './progress-gauges.js';

/**
 * Wires the metrics of PgQueueMetricsModule once the app's providers exist: the sinks the options turn on
 * (Prometheus, OpenTelemetry), the collector that feeds them from JobEvents, and the Prometheus registry the
 * controller serves. Inject it to read the Prometheus text yourself (`scrape()`) when `path` is false.
 */
@Injectable()
export class PgQueueMetrics implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new PgQueueLogger('PgQueue');
  private prometheus: PrometheusMetrics | undefined;
  private collector: JobMetricsCollector | undefined;
  private internals: QueueInternals[] | undefined;
  private lagAcquired = false;

  constructor(
    private readonly moduleRef: ModuleRef,
    @Inject(RESOLVED_METRICS_OPTIONS) private readonly options: ResolvedMetricsOptions,
    @Inject(METRICS_PEERS) private readonly peers: MetricsPeers,
  ) {}

  onModuleInit(): void {
    // Every database of the app (one PgQueueModule each): a queue's series come from the database that runs it.
    const internals = (this.internals = findQueueInternals(this.moduleRef, 'PgQueueMetricsModule'));
    const sinks: JobMetricsSink[] = [];
    const { promClient, otelApi } = this.peers;
    if (promClient) {
      this.prometheus = new PrometheusMetrics(promClient, this.options, this.options.depth ? depthOfAll(internals.map((i) => i.store)) : undefined, this.logger);
      eventLoopLag.acquire();
      this.lagAcquired = true;
      const progress = async () => mergeProgress(await Promise.all(internals.map((i) => readProgress(i, eventLoopLag, this.options.depthTimeoutMs))));
      this.prometheus.addMetrics(progressGauges(promClient, this.options.prefix, progress));
      this.prometheus.registerAll();
      sinks.push(this.prometheus);
    }
    if (this.options.openTelemetry) {
      if (otelApi) {
        const { durationBuckets: duration, claimLatencyBuckets: claimLatency } = this.options;
        sinks.push(new OtelMetrics(otelApi, this.options.openTelemetry.meterName, { duration, claimLatency }));
      } else {
        this.logger.warn(OTEL_API_MISSING());
      }
    }
    this.collector = new JobMetricsCollector(sinks);
    this.collector.start(internals.map((i) => i.events));
  }

  /** Every handler is known by now: their queues' series start at 0, so rate() sees a queue's first job. */
  onApplicationBootstrap(): void {
    if (this.prometheus && this.internals) this.prometheus.addQueues(this.internals.flatMap((i) => i.workerQueues()));
  }

  onModuleDestroy(): void {
    this.collector?.stop();
    this.prometheus?.unregisterAll();
    if (this.lagAcquired) eventLoopLag.release();
    this.lagAcquired = false;
  }

  /** The Prometheus registry's text and content type (what GET /metrics serves). */
  async scrape(): Promise<{ contentType: string; body: string }> {
    if (!this.prometheus) throw new NotFoundException(PROMETHEUS_OFF());
    return this.prometheus.scrape();
  }
}
