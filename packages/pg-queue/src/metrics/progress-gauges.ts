import type * as PromClient from 'prom-client';
import type { ProgressReport, UnreadyReason } from '../health/progress.js';

const PROCESS_REASONS: readonly UnreadyReason[] = ['event-loop-lag', 'listener-down'];

/**
 * The gauges of this process's progress (README: Health), filled when a scrape collects them from one read of
 * readProgress (shared by the three gauges of a scrape): the reasons readiness fails for, each 1 or 0, so an alert
 * can name the reason; the event loop's worst lag; each served queue's time since a claim answered.
 */
export function progressGauges(client: typeof PromClient, prefix: string, read: () => Promise<ProgressReport>): PromClient.Metric[] {
  let reading: Promise<ProgressReport> | undefined;
  const once = () => (reading ??= read().finally(() => setImmediate(() => (reading = undefined))));
  const unready: PromClient.Gauge<'reason' | 'queue'> = new client.Gauge({
    name: `${prefix}unready`,
    help: 'Why readiness fails, as far as progress goes: 1 for a reason that holds now (claim-stalled per queue, event-loop-lag, listener-down), else 0.',
    labelNames: ['reason', 'queue'],
    registers: [],
    collect: async () => {
      const report = await once();
      unready.reset();
      for (const reason of PROCESS_REASONS) unready.set({ reason, queue: '' }, report.unready.some((u) => u.reason === reason) ? 1 : 0);
      for (const queue of Object.keys(report.sinceClaimMs)) {
        unready.set({ reason: 'claim-stalled', queue }, report.unready.some((u) => u.reason === 'claim-stalled' && u.queue === queue) ? 1 : 0);
      }
    },
  });
  const lag: PromClient.Gauge = new client.Gauge({
    name: `${prefix}event_loop_lag_seconds`,
    help: "The worst lag of this process's event loop in the last 5 s (a timer's drift).",
    registers: [],
    collect: async () => lag.set((await once()).eventLoopLagMs / 1000),
  });
  const sinceClaim: PromClient.Gauge<'queue'> = new client.Gauge({
    name: `${prefix}claim_idle_seconds`,
    help: "Time since one of this process's claims of the queue last answered (with rows or none).",
    labelNames: ['queue'],
    registers: [],
    collect: async () => {
      const report = await once();
      sinceClaim.reset();
      for (const [queue, ms] of Object.entries(report.sinceClaimMs)) sinceClaim.set({ queue }, ms / 1000);
    },
  });
  return [unready, lag, sinceClaim];
}

/** Several databases' reports as one: their reasons together, the event loop's lag once (one per process). */
export function mergeProgress(reports: readonly ProgressReport[]): ProgressReport {
  return {
    unready: reports.flatMap((r) => r.unready),
    eventLoopLagMs: Math.max(0, ...reports.map((r) => r.eventLoopLagMs)),
    sinceClaimMs: Object.assign({}, ...reports.map((r) => r.sinceClaimMs)) as Record<string, number>,
  };
}
