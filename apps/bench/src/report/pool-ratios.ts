// Pools the per-run ratios of several bench reports (their JSON files) into one verdict per metric: a before/after at
// a few per cent needs 20 to 30 runs on this 2-core machine (docs/performance.md, "Pinned cores and the noise floor"),
// and those come from several invocations of `npm run bench -- --baseline DIR --runs N`. Each ratio is ours / peer
// within one run of one report, as the report's own table computes it; the pooled ones give their median, geometric
// mean, lowest and highest, and the distribution-free 95% interval of the median (order statistics of the sorted
// ratios, from the binomial distribution: no assumption about how the ratios spread).
//
//   npm run pool-ratios --workspace apps/bench -- results/a.json results/b.json [--ours pg-queue] [--peer pg-queue-base]
import { readFileSync } from 'node:fs';
import type { Sample } from './aggregate.js';
import { toolArg } from '../host/tool-args.js';

const files = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !all[i - 1]?.startsWith('--'));
const ours = toolArg('--ours', 'pg-queue');
const peer = toolArg('--peer', 'pg-queue-base');
if (files.length === 0) {
  console.error('usage: pool-ratios REPORT.json [REPORT.json ...] [--ours SYSTEM] [--peer SYSTEM]');
  process.exit(2);
}

/** Per metric: ours / peer in every run of every report where both measured it. */
const ratios = new Map<string, number[]>();
for (const file of files) {
  const { samples } = JSON.parse(readFileSync(file, 'utf8')) as { samples: Sample[] };
  const value = new Map<string, number>();
  for (const s of samples) if (Number.isFinite(s.value)) value.set(`${s.metric}\u0000${s.system}\u0000${s.run}`, s.value);
  for (const s of samples) {
    if (s.system !== peer || !Number.isFinite(s.value) || s.value === 0) continue;
    const mine = value.get(`${s.metric}\u0000${ours}\u0000${s.run}`);
    if (mine === undefined) continue;
    const list = ratios.get(s.metric) ?? [];
    ratios.set(s.metric, list);
    list.push(mine / s.value);
  }
}

/**
 * The ranks (0-based, in the sorted ratios) of the distribution-free 95% interval of the median: the largest k with
 * P(Binomial(n, 1/2) < k) <= 2.5%, and its mirror. Undefined below 6 ratios (no interval reaches 95% there).
 */
export function medianInterval(n: number): [number, number] | undefined {
  if (n < 6) return undefined;
  let below = 0;
  let k = 0;
  for (let i = 0; i <= n; i++) {
    const p = binomial(n, i) / 2 ** n;
    if (below + p > 0.025) break;
    below += p;
    k = i + 1;
  }
  return [k - 1, n - k];
}

function binomial(n: number, k: number): number {
  let c = 1;
  for (let i = 1; i <= k; i++) c = (c * (n - k + i)) / i;
  return c;
}

function median(sorted: number[]): number {
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const x = (v: number) => `${v.toFixed(3)}x`;
console.log(`${ours} / ${peer}, per-run ratios pooled over ${files.length} report(s)`);
console.log(['metric'.padEnd(48), 'runs', 'median'.padStart(8), 'geomean'.padStart(8), '95% interval of the median'.padStart(27), 'lowest-highest run'.padStart(20)].join('  '));
for (const [metric, list] of [...ratios].sort(([a], [b]) => a.localeCompare(b))) {
  const sorted = [...list].sort((a, b) => a - b);
  const geomean = Math.exp(sorted.reduce((sum, r) => sum + Math.log(r), 0) / sorted.length);
  const ranks = medianInterval(sorted.length);
  const interval = ranks ? `${x(sorted[ranks[0]])}-${x(sorted[ranks[1]])}` : '-';
  const range = `${x(sorted[0])}-${x(sorted[sorted.length - 1])}`;
  console.log([metric.padEnd(48), String(sorted.length).padStart(4), x(median(sorted)).padStart(8), x(geomean).padStart(8), interval.padStart(27), range.padStart(20)].join('  '));
}
