import type { OtelApiModule } from './otel-metrics.js';
import type { PromClientModule } from './prometheus-metrics.js';

/** Options after validation and defaults (resolve-metrics-options.ts). */
export const RESOLVED_METRICS_OPTIONS = Symbol('pg-queue:resolved_metrics_options');

/** The optional peers the options turned on, imported while the app boots. */
export const METRICS_PEERS = Symbol('pg-queue:metrics_peers');
export interface MetricsPeers {
  promClient: PromClientModule | undefined;
  otelApi: OtelApiModule | undefined;
}
