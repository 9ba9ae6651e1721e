import type { Pool } from 'pg';
import type { JobStatus } from '../interfaces/job.interface.js';
import { withTimeout } from '../utils/retry-backoff.js';
import { inTransaction } from './in-transaction.js';
import { beginWithTimeout, METRICS_SQL } from './metrics.sql.js';

/** One queue in a depth snapshot. */
export interface QueueDepth {
  /** Jobs of the queue by status (a status with none: 0). */
  counts: Record<JobStatus, number>;
  /** The statuses whose count is an estimate (above the exact limit); empty when all are exact. */
  approximate: JobStatus[];
  /** ms since the queue's earliest waiting job (queued, or buffered in a worker) came due (its lag); 0 when none is due. */
  oldestDueMs: number;
}

/** What the database holds, per queue, at one moment. */
export interface DepthSnapshot {
  queues: Record<string, QueueDepth>;
}

const STATUSES: readonly JobStatus[] = ['queued', 'blocked', 'processing', 'completed', 'failed', 'cancelled'];

export function emptyDepth(): QueueDepth {
  return { counts: { queued: 0, blocked: 0, processing: 0, completed: 0, failed: 0, cancelled: 0 }, approximate: [], oldestDueMs: 0 };
}

/**
 * The reads of metrics and health checks, on the queue's own pool. Not the hot path: statements are sent
 * unnamed (nothing stays prepared on the connections), each under its own statement timeout, so a slow scrape
 * or probe is cancelled by the server instead of holding a connection the workers need.
 */
export class MetricsStore {
  constructor(private readonly pool: Pool) {}

  /** Counts by queue and status (exact up to `exactLimit`, estimated from about `samplePages` pages above it) and each queue's lag. */
  async depthSnapshot(exactLimit: number, samplePages: number, timeoutMs: number): Promise<DepthSnapshot> {
    const rows = await inTransaction(
      this.pool,
      async (client) => (await client.query<{ queue_name: string; state: string; n: number; approximate: boolean }>(METRICS_SQL.depthSnapshot, [exactLimit, samplePages])).rows,
      beginWithTimeout(timeoutMs),
    );
    const queues: Record<string, QueueDepth> = {};
    for (const r of rows) {
      const depth = (queues[r.queue_name] ??= emptyDepth());
      if (r.state === 'oldest_due_ms') {
        depth.oldestDueMs = r.n;
      } else if (STATUSES.includes(r.state as JobStatus) || r.state === 'buffered') {
        // A buffered job (in a worker's read-ahead buffer, not started) waits: it counts as queued.
        const status = r.state === 'buffered' ? 'queued' : (r.state as JobStatus);
        depth.counts[status] += r.n;
        if (r.approximate && !depth.approximate.includes(status)) depth.approximate.push(status);
      }
    }
    return { queues };
  }

  /** Per queue with waiting jobs (queued, or buffered in a worker): ms since its earliest one came due (0: none due yet). */
  async oldestDue(timeoutMs: number): Promise<Record<string, number>> {
    const rows = await inTransaction(
      this.pool,
      async (client) => (await client.query<{ queue_name: string; oldest_due_ms: number }>(METRICS_SQL.oldestDue)).rows,
      beginWithTimeout(timeoutMs),
    );
    return Object.fromEntries(rows.map((r) => [r.queue_name, r.oldest_due_ms]));
  }

  /**
   * `SELECT 1` on the queue's pool, failing after `timeoutMs` (waiting for a free connection included; the
   * statement itself goes on and its connection returns to the pool when it answers).
   */
  async ping(timeoutMs: number): Promise<void> {
    await withTimeout(this.pool.query(METRICS_SQL.ping), timeoutMs, 'SELECT 1 on the queue\'s pool');
  }
}

/** The depth reads metrics make, of one database or of several as one (depthOfAll). */
export type DepthSource = Pick<MetricsStore, 'depthSnapshot'>;

/**
 * The depth of every database of an app that has several (docs/guides/several-databases.md), read in parallel: a
 * queue lives in one database, so its series come from it; a queue found in two (rows left behind by a move) is
 * added up, its lag the larger. One database's read failing fails the snapshot (a scrape then has no depth gauges).
 */
export function depthOfAll(stores: readonly MetricsStore[]): DepthSource {
  if (stores.length === 1) return stores[0];
  return {
    async depthSnapshot(exactLimit, samplePages, timeoutMs) {
      const snapshots = await Promise.all(stores.map((s) => s.depthSnapshot(exactLimit, samplePages, timeoutMs)));
      const queues: Record<string, QueueDepth> = {};
      for (const snapshot of snapshots) {
        for (const [queue, d] of Object.entries(snapshot.queues)) {
          const into = queues[queue];
          if (!into) {
            queues[queue] = d;
            continue;
          }
          for (const status of STATUSES) into.counts[status] += d.counts[status];
          for (const status of d.approximate) if (!into.approximate.includes(status)) into.approximate.push(status);
          into.oldestDueMs = Math.max(into.oldestDueMs, d.oldestDueMs);
        }
      }
      return { queues };
    },
  };
}
