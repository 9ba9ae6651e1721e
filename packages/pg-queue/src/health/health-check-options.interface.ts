/**
 * What a check of PgQueueHealthIndicator resolves to: `{ [key]: { status, ...details } }`, the shape of
 * @nestjs/terminus's HealthIndicatorResult (a 'down' status fails terminus's check with 503).
 */
export type HealthResult<K extends string = string> = Record<K, { status: 'up' | 'down'; message?: string; [detail: string]: unknown }>;

export interface DatabaseCheckOptions {
  /** The `SELECT 1` (waiting for a free connection of the queue's pool included) fails after this many ms. Default 2_000. */
  timeoutMs?: number;
}

export type ReadinessCheckOptions = DatabaseCheckOptions;

export interface ClaimLoopsCheckOptions {
  /** A claim loop waiting on one claim longer than this many ms is stuck. Default connectTimeoutMs + statementTimeoutMs + 10_000. */
  stuckAfterMs?: number;
}

export interface LagCheckOptions {
  /**
   * Largest lag allowed (ms since a queue's oldest due queued job came due): one number for every queue, or
   * `{ [queue]: ms }` to check only the queues named.
   */
  maxLagMs: number | Record<string, number>;
  /** The lag query is cancelled after this many ms (and the check is down). Default 2_000. */
  timeoutMs?: number;
}
