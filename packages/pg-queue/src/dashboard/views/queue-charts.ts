import type { TimeBucket } from '../../store/dashboard.store.js';
import { formatSpan } from './format.js';
import { html, type SafeHtml } from './html.js';

const W = 360;
const H = 90;
const PAD = 4;

/** What a span's buckets are: how many, how wide, and the x axis's labels (oldest, middle, now). */
export interface Span {
  /** "5 min", "hour": what one bucket covers, as the y axis says "jobs per ...". */
  per: string;
  /** What a bucket `n` steps before the newest is called in a tooltip. */
  ago: (n: number) => string;
  axis: [string, string, string];
}

export const HOUR_SPAN: Span = { per: '5 min', ago: (n) => (n === 0 ? 'the last 5 min' : `${n * 5}-${n * 5 + 5} min ago`), axis: ['60 min ago', '30 min ago', 'now'] };
export const DAY_SPAN: Span = { per: 'hour', ago: (n) => (n === 0 ? 'the last hour' : `${n}-${n + 1} h ago`), axis: ['24 h ago', '12 h ago', 'now'] };

/** The frame every chart of the queue page shares: the y axis (top, 0) beside the drawing, the time below. */
function frame(label: string, top: string, yTitle: string, span: Span, drawing: SafeHtml, caption: SafeHtml | string): SafeHtml {
  return html`<figure class="chart">
  <div class="chart-grid">
    <div class="y-axis" aria-hidden="true" title="${yTitle}"><span>${top}</span><span>0</span></div>
    <svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" role="img" aria-label="${label}"><title>${label}</title>
      <line class="grid" x1="${PAD}" y1="${PAD}" x2="${W - PAD}" y2="${PAD}"></line>
      <line class="axis" x1="${PAD}" y1="${H - PAD}" x2="${W - PAD}" y2="${H - PAD}"></line>
      ${drawing}
    </svg>
    <div aria-hidden="true"></div>
    <div class="x-axis" aria-hidden="true"><span>${span.axis[0]}</span><span>${span.axis[1]}</span><span>${span.axis[2]}</span></div>
  </div>
  <figcaption>${caption}</figcaption>
</figure>`;
}

/** Completed and failed jobs per bucket, stacked bars, with the scale's top as "N per <bucket>". */
export function throughputBars(queue: string, buckets: TimeBucket[], span: Span): SafeHtml {
  const peak = Math.max(0, ...buckets.map((b) => b.completed + b.failed));
  const max = Math.max(1, peak);
  const step = (W - 2 * PAD) / buckets.length;
  const y = (n: number) => (n / max) * (H - 2 * PAD);
  const bars = buckets.map((b, i) => {
    const x = (PAD + i * step).toFixed(1);
    const hc = y(b.completed);
    const hf = y(b.failed);
    return html`<g><title>${span.ago(buckets.length - 1 - i)}: ${String(b.completed)} completed, ${String(b.failed)} failed</title><rect class="c" x="${x}" y="${(H - PAD - hc).toFixed(1)}" width="${(step * 0.8).toFixed(1)}" height="${hc.toFixed(1)}"></rect><rect class="f" x="${x}" y="${(H - PAD - hc - hf).toFixed(1)}" width="${(step * 0.8).toFixed(1)}" height="${hf.toFixed(1)}"></rect></g>`;
  });
  const done = buckets.reduce((s, b) => s + b.completed, 0);
  const failed = buckets.reduce((s, b) => s + b.failed, 0);
  const label = `${queue}: ${done} completed and ${failed} failed, ${peak === 0 ? 'no jobs' : `peak ${peak} per ${span.per}`}`;
  return frame(label, `${max}/${span.per}`, `jobs finished per ${span.per}`, span, html`${bars}`, `throughput: ${done} completed · ${failed} failed · ${peak === 0 ? 'no jobs' : `peak ${peak}/${span.per}`}`);
}

/**
 * The 50th and 95th percentiles of a duration per bucket as two lines (p95 dashed), the y axis from 0 to the largest
 * p95 in ms, s or min. A bucket without finished jobs has no value: the lines break there (a lone bucket is a dot).
 */
export function percentileLines(queue: string, what: string, buckets: TimeBucket[], span: Span, p50: (b: TimeBucket) => number | null, p95: (b: TimeBucket) => number | null): SafeHtml {
  const top = Math.max(0, ...buckets.map((b) => p95(b) ?? p50(b) ?? 0));
  const max = top > 0 ? top : 1;
  const step = (W - 2 * PAD) / buckets.length;
  const point = (i: number, v: number) => `${(PAD + i * step + step * 0.4).toFixed(1)},${(H - PAD - (v / max) * (H - 2 * PAD)).toFixed(1)}`;
  const line = (pick: (b: TimeBucket) => number | null, cls: string): SafeHtml[] => {
    const runs: string[][] = [];
    let open = false;
    for (const [i, b] of buckets.entries()) {
      const v = pick(b);
      if (v === null) {
        open = false;
        continue;
      }
      if (!open) runs.push([]);
      open = true;
      runs[runs.length - 1].push(point(i, v));
    }
    return runs.map((points) => {
      if (points.length > 1) return html`<polyline class="${cls}" points="${points.join(' ')}"></polyline>`;
      const [cx, cy] = points[0].split(',');
      return html`<circle class="${cls}" cx="${cx}" cy="${cy}" r="1.5"></circle>`;
    });
  };
  const tips = buckets.map((b, i) =>
    p50(b) === null ? null : html`<rect class="tip" x="${(PAD + i * step).toFixed(1)}" y="0" width="${step.toFixed(1)}" height="${H}"><title>${span.ago(buckets.length - 1 - i)}: p50 ${formatSpan(p50(b)!)}, p95 ${formatSpan(p95(b) ?? p50(b)!)}</title></rect>`,
  );
  const all50 = buckets.map(p50).filter((v): v is number => v !== null);
  const label = `${queue}: ${what}, 50th and 95th percentiles per ${span.per}${top === 0 && all50.length === 0 ? ': no jobs' : `, up to ${formatSpan(top)}`}`;
  const caption = all50.length === 0 ? html`${what}: no finished jobs` : html`${what}: <span class="p50">p50</span> and <span class="p95">p95</span> per ${span.per}, up to ${formatSpan(top)}`;
  return frame(label, all50.length === 0 ? '—' : formatSpan(max), `${what} (p50 solid, p95 dashed)`, span, html`${tips}${line(p50, 'p50')}${line(p95, 'p95')}`, caption);
}
