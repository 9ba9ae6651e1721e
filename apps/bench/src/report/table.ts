import type { SystemId } from '../adapters/types.js';
import { SYSTEMS } from '../systems.js';
import type { Aggregate, Aggregates, RatioAggregates } from './aggregate.js';
import { formatNumber, formatRatio } from './format.js';
import type { MetricDef } from './metrics.js';

const OURS: SystemId = 'pg-queue';

/** "12,345 ±3%": the median and half the min-max range of the runs, relative to the median. */
function cell(a: Aggregate | undefined, digits: number): string {
  if (!a) return '-';
  const spread = a.runs > 1 && a.median !== 0 ? ` ±${Math.round(((a.max - a.min) / 2 / Math.abs(a.median)) * 100)}%` : '';
  return `${formatNumber(a.median, digits)}${spread}`;
}

/** ours / peer: the median of the per-run ratios (NaN when not measured). For a lower-is-better metric a ratio under 1 is the good side. */
export function ratio(ratios: RatioAggregates, metric: string, peer: SystemId): number {
  return ratios[metric]?.[peer]?.median ?? NaN;
}

/** "1.54x (1.31-1.72)": the median of the per-run ratios and, over several runs, the lowest and highest single run. */
export function ratioCell(a: Aggregate | undefined): string {
  if (!a) return 'n/a';
  return a.runs > 1 ? `${formatRatio(a.median)} (${formatRatio(a.min).slice(0, -1)}-${formatRatio(a.max)})` : formatRatio(a.median);
}

/** The one table: a row per metric, a column per system, then the ratios ours/peer. */
export function renderTable(defs: MetricDef[], aggregates: Aggregates, ratios: RatioAggregates, systems: SystemId[]): string {
  // A system that measured nothing in the scenarios run (pg-queue-defaults outside defaults and spread) gets no column.
  systems = systems.filter((s) => s === OURS || defs.some((d) => aggregates[d.id]?.[s] !== undefined));
  const peers = systems.filter((s) => s !== OURS);
  const showRatios = systems.includes(OURS);
  const header = ['metric', 'unit', ...systems.map((s) => SYSTEMS[s].label), ...(showRatios ? peers.map((p) => `ours/${SYSTEMS[p].label}`) : [])];
  const rows: string[][] = [];
  // Cell notes (MetricDef.notes), numbered in order of first use and printed under the table.
  const noteTexts: string[] = [];
  const mark = (def: MetricDef, s: SystemId): string => {
    const text = def.notes?.[s];
    if (text === undefined) return '';
    const full = `${SYSTEMS[s].label}: ${text}`;
    if (!noteTexts.includes(full)) noteTexts.push(full);
    return ` [${noteTexts.indexOf(full) + 1}]`;
  };
  for (const def of defs) {
    if (!aggregates[def.id]) continue;
    const measured = (s: SystemId) => aggregates[def.id][s] !== undefined;
    const arrow = def.better === 'higher' ? ' ↑' : def.better === 'lower' ? ' ↓' : '';
    rows.push([
      def.label,
      `${def.unit}${arrow}`,
      ...systems.map((s) => `${cell(aggregates[def.id][s], def.digits)}${mark(def, s)}`),
      // A noted cell is another measurement than ours (BullMQ's fan-in alone): no ratio ("n/c", not comparable).
      ...(showRatios ? peers.map((p) => (def.better === 'info' || !measured(p) || !measured(OURS) ? '' : def.notes?.[p] ? `n/c${mark(def, p)}` : ratioCell(ratios[def.id]?.[p]))) : []),
    ]);
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  const notes = noteTexts.map((text, i) => `[${i + 1}] ${text}`);
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line), ...(notes.length ? ['', ...notes] : [])].join('\n');
}
