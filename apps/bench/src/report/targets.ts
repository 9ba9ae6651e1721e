import type { SystemId } from '../adapters/types.js';
import type { Profile } from '../config.js';
import type { Aggregates, RatioAggregates } from './aggregate.js';
import { formatNumber, sizeLabel } from './format.js';
import { ratioCell } from './table.js';

export interface TargetCheck {
  target: string;
  measured: string;
  /** null: not measured in this run; 'info': a figure the issue asks to report, with no bar to pass. */
  met: boolean | null | 'info';
}

/**
 * The issue's targets, checked against the median of the per-run ratios (null: not measured in this run); the
 * measured column shows the lowest and highest single run too, so a target met only by the median says so.
 */
export function checkTargets(aggregates: Aggregates, ratios: RatioAggregates, profile: Profile): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const add = (target: string, value: number, met: ((v: number) => boolean) | 'info', show: (v: number) => string) =>
    checks.push({ target, measured: Number.isFinite(value) ? show(value) : 'not measured', met: !Number.isFinite(value) ? null : met === 'info' ? 'info' : met(value) });
  const addRatio = (target: string, metric: string, peer: SystemId, met: (v: number) => boolean) => {
    const a = ratios[metric]?.[peer];
    add(target, a?.median ?? NaN, met, () => ratioCell(a));
  };

  for (const c of profile.process.concurrencies) {
    addRatio(`processing (c=${c}) >= 1.5x graphile-worker`, `process.c${c}`, 'graphile-worker', (v) => v >= 1.5);
    addRatio(`processing (c=${c}) >= 0.9x the plain SQL loop`, `process.c${c}`, 'plain-sql', (v) => v >= 0.9);
  }
  addRatio('start latency p50 <= graphile-worker', 'latency.p50', 'graphile-worker', (v) => v <= 1);
  addRatio('start latency p99 <= graphile-worker', 'latency.p99', 'graphile-worker', (v) => v <= 1);
  // Issue 21, item 3: p99 at 0.8x (the app and the worker in one process); from another process, reported against the 1.0x bar.
  addRatio('start latency p99 <= 0.8x graphile-worker', 'latency.p99', 'graphile-worker', (v) => v <= 0.8);
  addRatio('start latency p50 <= graphile-worker, enqueued from another process', 'latencyRemote.p50', 'graphile-worker', (v) => v <= 1);
  addRatio('start latency p99 <= graphile-worker, enqueued from another process', 'latencyRemote.p99', 'graphile-worker', (v) => v <= 1);
  for (const peer of ['pg-boss', 'graphile-worker'] as const) {
    addRatio(`enqueue one at a time >= 2x ${peer}`, 'enqueue.sequential', peer, (v) => v >= 2);
    for (const b of profile.enqueue.bulkBatches) addRatio(`bulk enqueue (${sizeLabel(b)} per call) >= 2.5x ${peer}`, `enqueue.bulk.${sizeLabel(b)}`, peer, (v) => v >= 2.5);
  }
  // Issue 21, item 2: enqueue against the hand-written loop, measured interleaved (scenarios/interleaved-enqueue.ts).
  addRatio('enqueue one at a time >= 1.0x the plain SQL loop (interleaved, warm)', 'mixed.sequential', 'plain-sql', (v) => v >= 1);
  addRatio('enqueue, 16 concurrent callers >= 0.9x the plain SQL loop (interleaved)', 'mixed.concurrent', 'plain-sql', (v) => v >= 0.9);
  for (const b of profile.enqueue.bulkBatches) addRatio(`bulk enqueue (${sizeLabel(b)} per call) >= 0.9x the plain SQL loop (interleaved)`, `mixed.bulk.${sizeLabel(b)}`, 'plain-sql', (v) => v >= 0.9);
  // Item 5: 16 concurrent enqueuers at least 2x "today's" figure; the reference row without the NOTIFY trigger is the ceiling.
  const concurrent = aggregates['enqueue.concurrent']?.['pg-queue']?.median ?? NaN;
  const quiet = aggregates['enqueue.concurrentNoNotify']?.['pg-queue']?.median ?? NaN;
  add('16 concurrent enqueuers: share of the same inserts without the NOTIFY trigger', concurrent / quiet, 'info', (v) => `${Math.round(v * 100)}%`);
  const largest = Math.max(...profile.backlog.sizes);
  for (const shape of ['shared', 'spread']) {
    const small = aggregates[`backlog.10k.${shape}`]?.['pg-queue']?.median ?? NaN;
    const big = aggregates[`backlog.${sizeLabel(largest)}.${shape}`]?.['pg-queue']?.median ?? NaN;
    const note = largest < 1_000_000 ? ` (run with --full for 1M; ${sizeLabel(largest)} here)` : '';
    add(`claim rate at ${sizeLabel(largest)} queued >= 80% of 10k, ${shape} run_at${note}`, big / small, (v) => v >= 0.8, (v) => `${Math.round(v * 100)}%`);
  }
  for (const c of profile.defaults.concurrencies) {
    const tuned = ratios[`defaults.c${c}`]?.['pg-queue-defaults'];
    add(`defaults (bare @JobHandler) at c=${c}: share of the tuned throughput`, tuned ? 1 / tuned.median : NaN, 'info', (v) => `${Math.round(v * 100)}%`);
  }
  // Issue 42, part 1: fair share across keys (nestjs-pg-queue alone; scenarios/fairness.ts).
  const ours = (metric: string) => aggregates[metric]?.['pg-queue'];
  const spreadOf = (metric: string, show: (v: number) => string) => {
    const a = ours(metric);
    return a && a.runs > 1 ? ` (${show(a.min)}-${show(a.max)})` : '';
  };
  const x = (v: number) => `${formatNumber(v, 2)}x`;
  const worst = ours('fair.tenants.worstRatio')?.median ?? NaN;
  add('fairness: every small tenant done within 2x its fair share (worst of 50)', worst, (v) => v <= 2, (v) => `${x(v)}${spreadOf('fair.tenants.worstRatio', x)}`);
  const measured = ours('fair.tenants.worstRatioMeasured')?.median ?? NaN;
  add('  the same at the measured time per job and slot', measured, 'info', (v) => `${x(v)}${spreadOf('fair.tenants.worstRatioMeasured', x)}`);
  const fairRate = ours('fair.only.fair')?.median ?? NaN;
  for (const [reference, label] of [['fair.only.plain', 'no read-ahead'], ['fair.only.plainReadAhead', "the library's default read-ahead"], ['fair.only.perKey', 'concurrencyPerKey (keyed claim)']] as const) {
    const ref = ours(reference)?.median ?? NaN;
    const bar = reference === 'fair.only.plain';
    add(`fairness, one key alone: throughput ${bar ? '>= 0.9x' : 'vs'} the same queue without fairness, ${label}`, fairRate / ref, bar ? (v) => v >= 0.9 : 'info', x);
  }
  const noAhead = (ours('fair.only.fairNoReadAhead')?.median ?? NaN) / (ours('fair.only.plain')?.median ?? NaN);
  add('fairness, one key alone, both without read-ahead (prefetch: 0): throughput vs the same queue without fairness', noAhead, 'info', x);
  const oneProcess = (ours('fair.only1p.fair')?.median ?? NaN) / (ours('fair.only1p.plain')?.median ?? NaN);
  add('fairness, one key alone, the same slots in 1 process: throughput vs the same queue without fairness, no read-ahead', oneProcess, 'info', x);
  const weights = ours('fair.weights.ratio')?.median ?? NaN;
  add('fairness: weights 3:1 give 3:1 +/- 10% of the runs while both keys have work', weights, (v) => v >= 2.7 && v <= 3.3, (v) => `${formatNumber(v, 2)}:1${spreadOf('fair.weights.ratio', (n) => `${formatNumber(n, 2)}:1`)}`);
  const idle = aggregates['steady.idleStatementsPerSec']?.['pg-queue']?.median ?? NaN;
  add('idle: <= 1 query/s per worker process', idle, (v) => v <= 1, (v) => `${formatNumber(v, 2)}/s`);
  return checks;
}

export function renderTargets(all: TargetCheck[]): string {
  // Targets of scenarios this run did not select are counted, not listed.
  const checks = all.filter((c) => c.met !== null);
  const skipped = all.length - checks.length;
  const note = skipped ? [`  (${skipped} more not measured: their scenarios were not run)`] : [];
  if (checks.length === 0) return note.join('\n');
  const width = Math.max(...checks.map((c) => c.target.length));
  return [...checks.map((c) => `${c.met === null ? '  ?' : c.met === 'info' ? '   ' : c.met ? ' ok' : 'MISS'}  ${c.target.padEnd(width)}  ${c.measured}`), ...note].join('\n');
}
