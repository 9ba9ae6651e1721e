import { Module } from '@nestjs/common';
import { loadOtelApi } from '../tracing/otel-api.js';
import { loadPromClient } from './load-prom-client.js';
import { METRICS_PEERS, RESOLVED_METRICS_OPTIONS, type MetricsPeers } from './metrics.constants.js';
import { METRICS_OPTIONS, MetricsConfigurableModuleClass } from './metrics.module-definition.js';
import { PgQueueMetrics } from './pg-queue-metrics.service.js';
import { resolveMetricsOptions, type ResolvedMetricsOptions } from './resolve-metrics-options.js';

/**
 * Prometheus (and, on request, OpenTelemetry) metrics of the queue: import next to PgQueueModule.
 * `PgQueueMetricsModule.forRoot({ prefix, register, ... })`, or `.forRootAsync({ imports, inject, useFactory })`;
 * `path` (default '/metrics', false for none) sits next to them. Wiring only: PgQueueMetrics does the work.
 */
@Module({
  providers: [
    { provide: RESOLVED_METRICS_OPTIONS, useFactory: resolveMetricsOptions, inject: [METRICS_OPTIONS] },
    {
      provide: METRICS_PEERS,
      // Imported here, while the app boots: a missing prom-client fails the boot with the package's name.
      useFactory: async (options: ResolvedMetricsOptions): Promise<MetricsPeers> => ({
        promClient: options.prometheus ? await loadPromClient() : undefined,
        otelApi: options.openTelemetry ? await loadOtelApi() : undefined,
      }),
      inject: [RESOLVED_METRICS_OPTIONS],
    },
    PgQueueMetrics,
  ],
  exports: [PgQueueMetrics],
})
export class PgQueueMetricsModule extends MetricsConfigurableModuleClass {}
