import type { SystemId } from '../adapters/types.js';
import { SYSTEMS } from '../systems.js';
import type { Aggregates, RatioAggregates } from './aggregate.js';
import { formatNumber, formatRatio } from './format.js';
import type { MetricDef } from './metrics.js';

const COLORS: Record<SystemId, string> = {
  'pg-queue': '#c0392b',
  'pg-boss': '#2e86ab',
  'graphile-worker': '#e1a637',
  bullmq: '#27ae60',
  'plain-sql': '#8c8c8c',
  'pg-queue-base': '#e8a29b',
  'pg-queue-defaults': '#8e44ad',
};

const WIDTH = 1060;
const LABEL_W = 310;
const BAR_W = 380;
const BAR_H = 13;
const BAR_GAP = 3;
const GROUP_GAP = 16;

const SHORT: Record<SystemId, string> = { 'pg-queue': 'ours', 'pg-boss': 'pg-boss', 'graphile-worker': 'graphile', bullmq: 'bullmq', 'plain-sql': 'plain', 'pg-queue-base': 'ours before', 'pg-queue-defaults': 'ours defaults' };

/** Long header lines wrapped at a separator, so nothing runs off the right edge. */
function wrap(lines: string[], width = 150): string[] {
  const out: string[] = [];
  for (const line of lines) {
    let rest = line;
    while (rest.length > width) {
      const cut = Math.max(rest.lastIndexOf('; ', width), rest.lastIndexOf(', ', width));
      if (cut <= 0) break;
      out.push(rest.slice(0, cut + 1));
      rest = `   ${rest.slice(cut + 2)}`;
    }
    out.push(rest);
  }
  return out;
}

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * One horizontal bar group per charted metric, a bar per system, each group scaled to its own largest value
 * (the figures span five orders of magnitude), the median written at the end of each bar. Hand-written
 * SVG: no chart library to install, and the file diffs as text.
 */
export function renderSvg(defs: MetricDef[], aggregates: Aggregates, ratios: RatioAggregates, systems: SystemId[], title: string, header: string[]): string {
  const subtitle = wrap(header);
  // As in the table: a system with no figure in the scenarios run gets no legend entry and no bars.
  systems = systems.filter((s) => s === 'pg-queue' || defs.some((d) => aggregates[d.id]?.[s] !== undefined));
  const charted = defs.filter((d) => d.chart && aggregates[d.id]);
  const top = 40 + subtitle.length * 16 + 34;
  const groupH = systems.length * (BAR_H + BAR_GAP) + GROUP_GAP + 14;
  const height = top + charted.length * groupH + 20;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  out.push(`<rect width="100%" height="100%" fill="#ffffff"/>`);
  out.push(`<text x="16" y="26" font-size="17" font-weight="bold">${esc(title)}</text>`);
  subtitle.forEach((line, i) => out.push(`<text x="16" y="${46 + i * 16}" fill="#444">${esc(line)}</text>`));
  let lx = 16;
  const ly = 46 + subtitle.length * 16 + 6;
  for (const s of systems) {
    out.push(`<rect x="${lx}" y="${ly}" width="12" height="12" fill="${COLORS[s]}"/><text x="${lx + 17}" y="${ly + 10}">${esc(SYSTEMS[s].label)}</text>`);
    lx += 30 + SYSTEMS[s].label.length * 7;
  }
  let y = top;
  for (const def of charted) {
    const values = systems.map((s) => aggregates[def.id][s]?.median ?? NaN);
    const max = Math.max(...values.filter(Number.isFinite));
    const direction = def.better === 'higher' ? 'higher is better' : def.better === 'lower' ? 'lower is better' : '';
    const [first, second] = splitLabel(def.label);
    out.push(`<text x="16" y="${y + 10}" font-weight="bold">${esc(first)}</text>`);
    if (second) out.push(`<text x="16" y="${y + 24}" font-weight="bold">${esc(second)}</text>`);
    out.push(`<text x="16" y="${y + (second ? 39 : 25)}" fill="#666">${esc(`${def.unit}${direction ? `, ${direction}` : ''}`)}</text>`);
    const ours = systems.indexOf('pg-queue');
    systems.forEach((s, i) => {
      const v = values[i];
      const by = y + i * (BAR_H + BAR_GAP);
      const w = Number.isFinite(v) && max > 0 ? Math.max(1, (v / max) * BAR_W) : 0;
      out.push(`<rect x="${LABEL_W}" y="${by}" width="${w.toFixed(1)}" height="${BAR_H}" fill="${COLORS[s]}"/>`);
      out.push(`<text x="${LABEL_W + w + 6}" y="${by + BAR_H - 2}" fill="#222">${Number.isFinite(v) ? formatNumber(v, def.digits) : 'n/a'}</text>`);
      if (i === ours && Number.isFinite(v) && def.better !== 'info') {
        // The headline: ours / each peer, next to our bar.
        const shown = systems
          .map((p, j) => {
            const r = ratios[def.id]?.[p]?.median;
            return j === ours || r === undefined || !Number.isFinite(values[j]) ? '' : `${formatRatio(r)} ${SHORT[p]}`;
          })
          .filter(Boolean)
          .join(' · ');
        const x = LABEL_W + w + 6 + (formatNumber(v, def.digits).length + 2) * 7;
        out.push(`<text x="${x}" y="${by + BAR_H - 2}" fill="#888" font-size="11">(ours = ${esc(shown)})</text>`);
      }
    });
    y += groupH;
  }
  out.push('</svg>');
  return out.join('\n');
}

/** Labels longer than the label column go on two lines, split at the last space that fits. */
function splitLabel(label: string, max = 44): [string, string | undefined] {
  if (label.length <= max) return [label, undefined];
  const cut = label.lastIndexOf(' ', max);
  return cut > 0 ? [label.slice(0, cut), label.slice(cut + 1)] : [label, undefined];
}
