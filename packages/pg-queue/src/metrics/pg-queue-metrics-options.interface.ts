import type { Registry } from 'prom-client';

/** OpenTelemetry metrics of PgQueueMetricsModule (`openTelemetry: true` takes every default). */
export interface PgQueueOpenTelemetryOptions {
  /** The meter's (instrumentation scope's) name. Default 'nestjs-pg-queue'. */
  meterName?: string;
}

/**
 * Options of `PgQueueMetricsModule.forRoot()` / `forRootAsync()` (docs/metrics.md lists every metric). The
 * job counters and histograms are measured from this instance's workers (its JobEvents); the depth gauges read
 * the database, so every instance reports the same depth.
 */
export interface PgQueueMetricsOptions {
  /**
   * Prometheus metrics through prom-client, an optional peer dependency: install `prom-client` (^15). The boot
   * fails, naming the package, when it is missing. Default true.
   */
  prometheus?: boolean;
  /** Prefix of every Prometheus metric name. Default 'pg_queue_'. */
  prefix?: string;
  /** The prom-client Registry the metrics are registered in and served from. Default: prom-client's global `register`. */
  register?: Registry;
  /**
   * The depth gauges (jobs per queue and state, oldest due job's age), from one database query per scrape.
   * false leaves them out: for instance on every instance but one, since all would report the same numbers.
   * Default true.
   */
  depth?: boolean;
  /** Scrapes within this many ms of a depth query reuse its answer (concurrent scrapes always share one query). Default 5_000. */
  depthCacheMs?: number;
  /**
   * Depth counts are exact up to this many jobs per queue and state, and estimated from a sample of about 1,000
   * pages above it. The exact part reads up to this many index entries (and rows, for running and finished jobs)
   * per state: on a table of 1M jobs, 1,000 cost about 30 ms a scrape and 10,000 about 120 ms. Default 1_000.
   */
  depthExactLimit?: number;
  /** The depth query is cancelled by the server after this many ms; that scrape then has no depth gauges. Default 5_000. */
  depthTimeoutMs?: number;
  /** Buckets (seconds) of the job duration histogram. Default 0.005 s to 5 min. */
  durationBuckets?: number[];
  /** Buckets (seconds) of the claim latency histogram (due to claimed). Default 0.005 s to 15 min. */
  claimLatencyBuckets?: number[];
  /**
   * OpenTelemetry metrics through the `@opentelemetry/api` meter (an optional peer dependency): jobs started,
   * completed and failed, duration and claim latency, recorded to whatever MeterProvider the app registers.
   * Off unless asked for: the API is often installed without an SDK (prom-client itself depends on it), and
   * measuring costs a listener per job. When on and the package is missing, a warning is logged and nothing is
   * recorded. Default false.
   */
  openTelemetry?: boolean | PgQueueOpenTelemetryOptions;
}

/** Given next to the options of forRoot / forRootAsync (known when the module is defined). */
export interface PgQueueMetricsModuleExtras {
  /**
   * Where the Prometheus text is served (an HTTP GET route of the app, under its global prefix if it sets one),
   * or false to serve nothing (the app already exposes the registry, e.g. through another Prometheus module).
   * Default '/metrics'.
   */
  path?: string | false;
}
