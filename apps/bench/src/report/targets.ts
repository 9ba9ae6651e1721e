import type { Profile } from '../config.js';
import type { Aggregates } from './aggregate.js';
import { formatNumber, formatRatio, sizeLabel } from './format.js';
import { ratio } from './table.js';

export interface TargetCheck {
  target: string;
  measured: string;
  met: boolean | null;
}

/** The targets, checked against this run's medians (null: not measured in this run). */
export function checkTargets(aggregates: Aggregates, profile: Profile): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const r = (metric: string, peer: Parameters<typeof ratio>[2]) => ratio(aggregates, metric, peer);
  const add = (target: string, value: number, met: (v: number) => boolean, show = formatRatio) =>
    checks.push({ target, measured: Number.isFinite(value) ? show(value) : 'not measured', met: Number.isFinite(value) ? met(value) : null });

  for (const c of profile.process.concurrencies) {
    add(`processing (c=${c}) >= 1.5x graphile-worker`, r(`process.c${c}`, 'graphile-worker'), (v) => v >= 1.5);
    add(`processing (c=${c}) >= 0.9x the plain SQL loop`, r(`process.c${c}`, 'plain-sql'), (v) => v >= 0.9);
  }
  add('start latency p50 <= graphile-worker', r('latency.p50', 'graphile-worker'), (v) => v <= 1);
  add('start latency p99 <= graphile-worker', r('latency.p99', 'graphile-worker'), (v) => v <= 1);
  for (const peer of ['pg-boss', 'graphile-worker'] as const) {
    add(`enqueue one at a time >= 2x ${peer}`, r('enqueue.sequential', peer), (v) => v >= 2);
    add(`bulk enqueue >= 2.5x ${peer}`, r('enqueue.bulk', peer), (v) => v >= 2.5);
  }
  const largest = Math.max(...profile.backlog.sizes);
  for (const shape of ['shared', 'spread']) {
    const small = aggregates[`backlog.10k.${shape}`]?.['pg-queue']?.median ?? NaN;
    const big = aggregates[`backlog.${sizeLabel(largest)}.${shape}`]?.['pg-queue']?.median ?? NaN;
    const note = largest < 1_000_000 ? ` (run with --full for 1M; ${sizeLabel(largest)} here)` : '';
    add(`claim rate at ${sizeLabel(largest)} queued >= 80% of 10k, ${shape} run_at${note}`, big / small, (v) => v >= 0.8, (v) => `${Math.round(v * 100)}%`);
  }
  const idle = aggregates['steady.idleStatementsPerSec']?.['pg-queue']?.median ?? NaN;
  add('idle: <= 1 query/s per worker process', idle, (v) => v <= 1, (v) => `${formatNumber(v, 2)}/s`);
  return checks;
}

export function renderTargets(checks: TargetCheck[]): string {
  const width = Math.max(...checks.map((c) => c.target.length));
  return checks.map((c) => `${c.met === null ? '  ?' : c.met ? ' ok' : 'MISS'}  ${c.target.padEnd(width)}  ${c.measured}`).join('\n');
}
