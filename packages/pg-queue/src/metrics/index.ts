// nestjs-pg-queue/metrics: Prometheus and OpenTelemetry metrics of the queue (docs/metrics.md).
export { PgQueueMetricsModule } from './pg-queue-metrics.module.js';
export { PgQueueMetrics } from './pg-queue-metrics.service.js';
export type { PgQueueMetricsOptions, PgQueueMetricsModuleExtras, PgQueueOpenTelemetryOptions } from './pg-queue-metrics-options.interface.js';
export { METRICS_OPTIONS as PG_QUEUE_METRICS_OPTIONS } from './metrics.module-definition.js';
