import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { JobHandler, type Job } from 'nestjs-pg-queue';
import { DataSource } from 'typeorm';
import {
  OrdersSummaries,
  SUMMARY_ITEM_CHARS,
  SUMMARY_STEP_MS,
  SUMMARY_TIMEOUT_MS,
  SUMMARY_TOP_ITEMS,
  type OrdersSummary,
  type OrdersSummaryPayload,
} from '../queues/orders-summary.queue.js';

interface SummaryRow {
  orders: number;
  total: number;
  items: number;
  top: { item: string; orders: number; total: number }[];
  from: Date;
  until: Date;
}

/**
 * A report on demand: walks the orders of the last few minutes in steps (pretend each is slow), reports its
 * progress after each (job.progress: kept in memory, written with the next heartbeat), and returns the
 * summary, which the queue stores with the completed job.
 */
@Injectable()
export class OrdersSummaryHandler {
  constructor(private readonly dataSource: DataSource) {}

  @JobHandler(OrdersSummaries, { concurrency: 2, maxAttempts: 2, timeoutMs: SUMMARY_TIMEOUT_MS })
  async summarize(job: Job<OrdersSummaryPayload>): Promise<OrdersSummary> {
    // One statement, so that the totals, the top items and the window share one now(). Only the top items
    // come back by name: one row per item would let a few thousand items (or one huge name) push the result
    // past the size the queue stores, and then every summary of that window would fail.
    const [row] = (await this.dataSource.query(
      `WITH recent AS (
         SELECT left(item, $3) AS item, amount FROM orders WHERE created_at >= now() - make_interval(mins => $1)
       ), per_item AS (
         SELECT item, count(*)::int AS orders, sum(amount) AS total FROM recent GROUP BY item
       )
       SELECT (SELECT count(*)::int FROM recent) AS orders,
              (SELECT coalesce(sum(amount), 0)::float8 FROM recent) AS total,
              (SELECT count(*)::int FROM per_item) AS items,
              coalesce((SELECT jsonb_agg(jsonb_build_object('item', t.item, 'orders', t.orders, 'total', t.total::float8) ORDER BY t.total DESC, t.item)
                        FROM (SELECT * FROM per_item ORDER BY total DESC, item LIMIT $2) AS t), '[]'::jsonb) AS top,
              now() - make_interval(mins => $1) AS "from", now() AS until`,
      [job.payload.minutes, SUMMARY_TOP_ITEMS, SUMMARY_ITEM_CHARS],
    )) as SummaryRow[];
    const steps = job.payload.steps ?? 20;
    for (let step = 1; step <= steps; step++) {
      await sleep(SUMMARY_STEP_MS, undefined, { signal: job.signal });
      job.progress({ step, of: steps, percent: Math.round((step * 100) / steps) });
    }
    const cents = (n: number) => Math.round(n * 100) / 100;
    const listed = row.top.reduce((sum, t) => ({ orders: sum.orders + t.orders, total: sum.total + t.total }), { orders: 0, total: 0 });
    return {
      orders: row.orders,
      total: cents(row.total),
      byItem: Object.fromEntries(row.top.map((t) => [t.item, { orders: t.orders, total: cents(t.total) }])),
      otherItems: { items: row.items - row.top.length, orders: row.orders - listed.orders, total: cents(row.total - listed.total) },
      from: new Date(row.from).toISOString(),
      until: new Date(row.until).toISOString(),
    };
  }
}
