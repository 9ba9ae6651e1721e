import { html, type SafeHtml } from './html.js';

export interface MinuteBucket {
  completed: number;
  failed: number;
}

const W = 360;
const H = 90;
const PAD = 4;

/**
 * The last hour as an inline SVG drawn on the server: one stacked bar per minute (completed, then failed
 * on top) and the failure rate (failed / finished, 0 to 100 %) as a line over it. `buckets[0]` is the
 * oldest minute, the last one the current minute.
 */
export function throughputChart(queue: string, buckets: MinuteBucket[]): SafeHtml {
  const peak = Math.max(0, ...buckets.map((b) => b.completed + b.failed));
  const max = Math.max(1, peak);
  const step = (W - 2 * PAD) / buckets.length;
  const y = (n: number) => (n / max) * (H - 2 * PAD);
  const bars = buckets.map((b, i) => {
    const x = (PAD + i * step).toFixed(1);
    const hc = y(b.completed);
    const hf = y(b.failed);
    const minutesAgo = buckets.length - 1 - i;
    const title = `${minutesAgo === 0 ? 'this minute' : `${minutesAgo} min ago`}: ${b.completed} completed, ${b.failed} failed`;
    return html`<g><title>${title}</title><rect class="c" x="${x}" y="${(H - PAD - hc).toFixed(1)}" width="${(step * 0.8).toFixed(1)}" height="${hc.toFixed(1)}"></rect><rect class="f" x="${x}" y="${(H - PAD - hc - hf).toFixed(1)}" width="${(step * 0.8).toFixed(1)}" height="${hf.toFixed(1)}"></rect></g>`;
  });
  const done = buckets.reduce((s, b) => s + b.completed, 0);
  const failed = buckets.reduce((s, b) => s + b.failed, 0);
  const rate = done + failed === 0 ? '—' : `${((100 * failed) / (done + failed)).toFixed(1)} %`;
  // An empty queue has no peak: "peak 1/min" was the scale's floor, not a minute with a job.
  const peakText = peak === 0 ? 'no jobs' : `peak ${peak}/min`;
  const label = `${queue}: ${done} completed and ${failed} failed in the last hour, failure rate ${rate}; ${peak === 0 ? 'no jobs' : `peak ${peak} per minute`}`;
  // The axes are HTML beside the drawing (the SVG stretches to the card's width: text inside it would stretch too):
  // jobs per minute on the left (0 to the scale's top), the failure rate on the right (0 to 100 %), time below.
  return html`<figure class="chart">
  <div class="chart-grid">
    <div class="y-axis" aria-hidden="true" title="jobs finished per minute"><span>${String(max)}/min</span><span>0</span></div>
    <svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" role="img" aria-label="${label}"><title>${label}</title>
      <line class="grid" x1="${PAD}" y1="${PAD}" x2="${W - PAD}" y2="${PAD}"></line>
      <line class="axis" x1="${PAD}" y1="${H - PAD}" x2="${W - PAD}" y2="${H - PAD}"></line>
      ${bars}
      ${rateLine(buckets, step)}
    </svg>
    <div class="y-axis rate-axis" aria-hidden="true" title="failure rate: failed / finished in the minute"><span>100 %</span><span>0 %</span></div>
    <div class="x-axis" aria-hidden="true"><span>60 min ago</span><span>30 min ago</span><span>now</span></div>
  </div>
  <figcaption>${done} completed · ${failed} failed · failure rate ${rate} · ${peakText} · 60 min</figcaption>
</figure>`;
}

/**
 * The failure rate of each minute with finished jobs, as a line through consecutive such minutes. A minute without
 * jobs has no rate: the line breaks there (a line across it would draw rates nobody measured), and a minute with
 * jobs between two without is a dot.
 */
function rateLine(buckets: MinuteBucket[], step: number): SafeHtml[] {
  const runs: string[][] = [];
  let inRun = false;
  for (const [i, b] of buckets.entries()) {
    const total = b.completed + b.failed;
    if (total === 0) {
      inRun = false;
      continue;
    }
    if (!inRun) runs.push([]);
    inRun = true;
    runs[runs.length - 1].push(`${(PAD + i * step + step * 0.4).toFixed(1)},${(H - PAD - (b.failed / total) * (H - 2 * PAD)).toFixed(1)}`);
  }
  return runs.map((points) => {
    if (points.length > 1) return html`<polyline class="rate" points="${points.join(' ')}"></polyline>`;
    const [cx, cy] = points[0].split(',');
    return html`<circle class="rate" cx="${cx}" cy="${cy}" r="1.5"></circle>`;
  });
}
