import { defineQueue } from 'nestjs-pg-queue';
import { firstProblem, integerProblem } from './payload-checks.js';

/** Each pretend-slow step of a summary. */
export const SUMMARY_STEP_MS = 500;
/** Most steps a summary may take: 40 x 500 ms = 20 s of its 30 s timeout, the rest for the query. */
export const MAX_SUMMARY_STEPS = 40;
/** A summary attempt is aborted after this long; more steps than MAX_SUMMARY_STEPS would always time out. */
export const SUMMARY_TIMEOUT_MS = 30_000;
/** A week: the orders a summary may cover. */
export const MAX_SUMMARY_MINUTES = 10_080;
/** Items listed one by one in a summary (the largest totals); the rest are summed in `otherItems`. */
export const SUMMARY_TOP_ITEMS = 10;
/** Item names in a summary are cut to this many characters (orders placed before items were limited may hold more). */
export const SUMMARY_ITEM_CHARS = 200;

export interface OrdersSummaryPayload {
  /** Orders of the last this many minutes. */
  minutes: number;
  /** Pretend-slow steps, SUMMARY_STEP_MS each (default 20: ten seconds, two heartbeats of progress to watch). */
  steps?: number;
}

/**
 * What the job returns: stored with the completed job, read back with get(id) or waitFor(id). Its size is
 * bounded whatever the orders hold (a stored result has a size limit, 64 KiB by default): the top items, and
 * totals for the rest.
 */
export interface OrdersSummary {
  orders: number;
  total: number;
  /** The SUMMARY_TOP_ITEMS items with the largest totals, by name (cut to SUMMARY_ITEM_CHARS characters). */
  byItem: Record<string, { orders: number; total: number }>;
  /** The items not in byItem, summed. */
  otherItems: { items: number; orders: number; total: number };
  from: string;
  until: string;
}

/** The `orders-summary` queue, typed (payload and result) and validated (see emails.queue.ts). */
export const OrdersSummaries = defineQueue<OrdersSummaryPayload, OrdersSummary>('orders-summary', {
  validate: (payload) =>
    firstProblem(payload, '{ minutes, steps? }', (p) => [
      integerProblem('minutes', p.minutes, 1, MAX_SUMMARY_MINUTES),
      p.steps === undefined ? undefined : integerProblem('steps', p.steps, 1, MAX_SUMMARY_STEPS),
    ]),
});
