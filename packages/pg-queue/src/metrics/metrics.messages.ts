// Error and log texts of the metrics and health entry points, kept beside them (the main entry never loads them).

export const OTEL_API_MISSING = () =>
  'PgQueueMetricsModule: openTelemetry is on but "@opentelemetry/api" is not installed, so no OpenTelemetry metrics are recorded. Install it (`npm install @opentelemetry/api@^1.9.0`) with an OpenTelemetry SDK, or set openTelemetry: false.';

export const NO_PG_QUEUE_MODULE = (who: string) =>
  `${who} found no PgQueueModule in this app: import PgQueueModule.forRoot() (or forRootAsync()) in the app, next to ${who}.`;

export const METRIC_NAME_TAKEN = (name: string, detail: string) =>
  `PgQueueMetricsModule: the registry already has a metric named "${name}" (${detail}). Give the module another \`prefix\`, or a registry of its own (\`register\`).`;

export const BAD_METRICS_OPTION = (name: string, value: unknown, expected: string) =>
  `Invalid PgQueueMetricsModule option ${name}=${describe(value)}: expected ${expected}.`;

export const DEPTH_QUERY_FAILED = (detail: string) =>
  `the depth query of a metrics scrape failed (${detail}); this scrape has no pg_queue depth gauges`;

export const PROMETHEUS_OFF = () => 'Prometheus metrics are off (PgQueueMetricsModule option prometheus: false).';

export const BAD_HEALTH_OPTION = (method: string, name: string, value: unknown, expected: string) =>
  `Invalid PgQueueHealthIndicator.${method} option ${name}=${describe(value)}: expected ${expected}.`;

function describe(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
