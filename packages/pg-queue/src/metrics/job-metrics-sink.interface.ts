/**
 * Where JobMetricsCollector sends its measurements: Prometheus and OpenTelemetry each implement it, so both
 * count the same things from the same events. Called synchronously on the worker's path: no I/O here.
 */
export interface JobMetricsSink {
  /** A handler was called; `claimLatencyMs`: due to claimed, by the database clock (absent for test jobs). */
  started(queue: string, claimLatencyMs: number | undefined): void;
  /** An attempt's outcome was written: its success, or a failure (each failed attempt, the last one included). */
  finished(queue: string, outcome: 'completed' | 'failed', durationMs: number): void;
  /** The job's last attempt failed: it is dead-lettered (status `failed`). */
  dead(queue: string): void;
  /** The job was cancelled while its handler ran. */
  cancelled(queue: string): void;
  /** The row was taken back while its handler ran (the lease ran out: a frozen or partitioned worker). */
  leaseLost(queue: string): void;
}
