import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { JobHandler, type Job } from 'nestjs-pg-queue';
import { DataSource } from 'typeorm';

export interface OrdersSummaryPayload {
  /** Orders of the last this many minutes. */
  minutes: number;
  /** Pretend-slow steps, STEP_MS each (default 20: ten seconds, two heartbeats of progress to watch). */
  steps?: number;
}

/** What the job returns: stored with the completed job, read back with get(id) or waitFor(id). */
export interface OrdersSummary {
  orders: number;
  total: number;
  byItem: Record<string, { orders: number; total: number }>;
  from: string;
  until: string;
}

const STEP_MS = 500;

/**
 * A report on demand: walks the orders of the last few minutes in steps (pretend each is slow), reports its
 * progress after each (job.progress: kept in memory, written with the next heartbeat), and returns the
 * summary, which the queue stores with the completed job.
 */
@Injectable()
export class OrdersSummaryHandler {
  constructor(private readonly dataSource: DataSource) {}

  @JobHandler('orders-summary', { concurrency: 2, maxAttempts: 2, timeoutMs: 30_000 })
  async summarize(job: Job<OrdersSummaryPayload>): Promise<OrdersSummary> {
    const rows = (await this.dataSource.query(
      `SELECT item, count(*)::int AS orders, coalesce(sum(amount), 0)::float8 AS total, now() - make_interval(mins => $1) AS "from", now() AS until
       FROM orders WHERE created_at >= now() - make_interval(mins => $1) GROUP BY item ORDER BY item`,
      [job.payload.minutes],
    )) as { item: string; orders: number; total: number; from: Date; until: Date }[];
    const steps = job.payload.steps ?? 20;
    for (let step = 1; step <= steps; step++) {
      await sleep(STEP_MS, undefined, { signal: job.signal });
      job.progress({ step, of: steps, percent: Math.round((step * 100) / steps) });
    }
    const byItem = Object.fromEntries(rows.map((r) => [r.item, { orders: r.orders, total: r.total }]));
    const [{ from, until }] = rows.length ? rows : [{ from: new Date(Date.now() - job.payload.minutes * 60_000), until: new Date() }];
    return {
      orders: rows.reduce((n, r) => n + r.orders, 0),
      total: Math.round(rows.reduce((n, r) => n + r.total, 0) * 100) / 100,
      byItem,
      from: new Date(from).toISOString(),
      until: new Date(until).toISOString(),
    };
  }
}
