import type { SystemId } from '../adapters/types.js';

export interface Sample {
  run: number;
  system: SystemId;
  metric: string;
  value: number;
}

export interface Aggregate {
  median: number;
  min: number;
  max: number;
  runs: number;
}

export type Aggregates = Record<string, Partial<Record<SystemId, Aggregate>>>;

/** Median and range per metric and system over the runs (NaN samples, from a failed run, are left out). */
export function aggregate(samples: Sample[]): Aggregates {
  const groups = new Groups();
  for (const s of samples) if (Number.isFinite(s.value)) groups.add(s.metric, s.system, s.value);
  return groups.summary();
}

/** Values per metric and system, summarised as median and range. */
class Groups {
  private readonly byMetric = new Map<string, Map<SystemId, number[]>>();

  add(metric: string, system: SystemId, value: number): void {
    const bySystem = this.byMetric.get(metric) ?? new Map<SystemId, number[]>();
    this.byMetric.set(metric, bySystem);
    const values = bySystem.get(system) ?? [];
    bySystem.set(system, values);
    values.push(value);
  }

  summary(): Aggregates {
    const out: Aggregates = {};
    for (const [metric, bySystem] of this.byMetric) {
      out[metric] = {};
      for (const [system, values] of bySystem) {
        const sorted = [...values].sort((a, b) => a - b);
        out[metric][system] = { median: median(sorted), min: sorted[0], max: sorted[sorted.length - 1], runs: sorted.length };
      }
    }
    return out;
  }
}

function median(sorted: number[]): number {
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Per metric and peer: ours / peer computed within each run, then median and range over the runs. */
export type RatioAggregates = Record<string, Partial<Record<SystemId, Aggregate>>>;

/**
 * Ratios ours / peer, one per run in which both systems measured the metric: within a run the two ran minutes
 * apart on the same machine state, so a run-to-run swing of the machine moves both and cancels in the ratio.
 * The median of those ratios is the headline; min and max show how far single runs strayed.
 */
export function runRatios(samples: Sample[], ours: SystemId): RatioAggregates {
  const byKey = new Map<string, number>();
  for (const s of samples) if (Number.isFinite(s.value)) byKey.set(`${s.metric}\u0000${s.system}\u0000${s.run}`, s.value);
  const groups = new Groups();
  for (const s of samples) {
    if (s.system === ours || !Number.isFinite(s.value) || s.value === 0) continue;
    const mine = byKey.get(`${s.metric}\u0000${ours}\u0000${s.run}`);
    if (mine !== undefined) groups.add(s.metric, s.system, mine / s.value);
  }
  return groups.summary();
}
