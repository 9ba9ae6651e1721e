import type { SystemId } from '../adapters/types.js';
import { SYSTEMS } from '../systems.js';
import type { Aggregate, Aggregates } from './aggregate.js';
import { formatNumber, formatRatio } from './format.js';
import type { MetricDef } from './metrics.js';

const OURS: SystemId = 'pg-queue';

/** "12,345 ±3%": the median and half the min-max range of the runs, relative to the median. */
function cell(a: Aggregate | undefined, digits: number): string {
  if (!a) return '-';
  const spread = a.runs > 1 && a.median !== 0 ? ` ±${Math.round(((a.max - a.min) / 2 / Math.abs(a.median)) * 100)}%` : '';
  return `${formatNumber(a.median, digits)}${spread}`;
}

/** ours / peer, on medians. For a lower-is-better metric a ratio under 1 is the good side. */
export function ratio(aggregates: Aggregates, metric: string, peer: SystemId): number {
  const ours = aggregates[metric]?.[OURS]?.median;
  const theirs = aggregates[metric]?.[peer]?.median;
  if (ours === undefined || theirs === undefined || theirs === 0) return NaN;
  return ours / theirs;
}

/** The one table: a row per metric, a column per system, then the ratios ours/peer. */
export function renderTable(defs: MetricDef[], aggregates: Aggregates, systems: SystemId[]): string {
  const peers = systems.filter((s) => s !== OURS);
  const showRatios = systems.includes(OURS);
  const header = ['metric', 'unit', ...systems.map((s) => SYSTEMS[s].label), ...(showRatios ? peers.map((p) => `ours/${SYSTEMS[p].label}`) : [])];
  const rows: string[][] = [];
  for (const def of defs) {
    if (!aggregates[def.id]) continue;
    const arrow = def.better === 'higher' ? ' ↑' : def.better === 'lower' ? ' ↓' : '';
    rows.push([
      def.label,
      `${def.unit}${arrow}`,
      ...systems.map((s) => cell(aggregates[def.id][s], def.digits)),
      ...(showRatios ? peers.map((p) => (def.better === 'info' ? '' : formatRatio(ratio(aggregates, def.id, p)))) : []),
    ]);
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}
