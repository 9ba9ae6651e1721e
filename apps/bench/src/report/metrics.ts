import type { Profile } from '../config.js';
import { spreadMetric } from '../scenarios/spread.js';
import { sizeLabel } from './format.js';

export interface MetricDef {
  id: string;
  label: string;
  unit: string;
  /** Which way is better; 'info' rows get no judgement. */
  better: 'higher' | 'lower' | 'info';
  digits: number;
  /** Drawn in the chart. */
  chart: boolean;
}

/** Every row of the table, in order, for the sizes this profile runs. */
export function metricCatalog(profile: Profile): MetricDef[] {
  const rate = (id: string, label: string, chart = true): MetricDef => ({ id, label, unit: 'jobs/s', better: 'higher', digits: 0, chart });
  const ms = (id: string, label: string, chart = true): MetricDef => ({ id, label, unit: 'ms', better: 'lower', digits: 1, chart });
  const info = (id: string, label: string, unit: string, digits: number): MetricDef => ({ id, label, unit, better: 'info', digits, chart: false });
  const e = profile.enqueue;
  const defs: MetricDef[] = [
    rate('enqueue.sequential', 'enqueue, one call at a time'),
    rate('enqueue.concurrent', `enqueue, ${e.callers} concurrent callers (1 job per transaction)`),
    info('enqueue.concurrent.lockObjectMean', `  backends waiting on Lock:object (of ${e.callers}), mean`, 'backends', 1),
    info('enqueue.concurrent.lockObjectMax', `  backends waiting on Lock:object (of ${e.callers}), max`, 'backends', 0),
    rate('enqueue.concurrentNoNotify', `  the same, NOTIFY trigger disabled (reference)`, false),
    ...e.bulkBatches.map((b) => rate(`enqueue.bulk.${sizeLabel(b)}`, `enqueue, bulk with ids (${b.toLocaleString('en-US')} per call)`)),
  ];
  for (const c of profile.process.concurrencies) {
    defs.push(rate(`process.c${c}`, `process ${sizeLabel(profile.process.jobs)}, concurrency ${c}`));
    defs.push({ id: `process.c${c}.cpuUsPerJob`, label: `  machine CPU per job (Node and PostgreSQL)`, unit: 'µs', better: 'lower', digits: 1, chart: false });
    defs.push(info(`process.c${c}.walBytesPerJob`, `  WAL per job (insert to completion)`, 'bytes', 0));
    defs.push(info(`process.c${c}.rowVersionsPerJob`, `  row versions per job (inserts, updates, deletes)`, 'rows', 2));
    defs.push(info(`process.c${c}.hotShare`, `  of the updates, HOT (no index entries)`, '%', 0));
  }
  for (const c of profile.defaults.concurrencies) defs.push(rate(`defaults.c${c}`, `process ${sizeLabel(profile.defaults.jobs)}, c${c}: tuned vs defaults`));
  const sp = profile.spread;
  for (const d of sp.durations) {
    const m = spreadMetric(d.jobMs);
    defs.push(
      { ...rate(m, `${sp.processes} processes x c${sp.concurrency}, ${d.jobMs >= 1000 ? `${d.jobMs / 1000} s` : `${d.jobMs} ms`} jobs (${d.jobs.toLocaleString('en-US')})`), digits: 1 },
      info(`${m}.minShare`, `  share of the jobs, least busy process`, '%', 1),
      info(`${m}.maxShare`, `  share of the jobs, busiest process`, '%', 1),
    );
  }
  defs.push(ms('latency.p50', 'start latency p50'), ms('latency.p95', 'start latency p95', false), ms('latency.p99', 'start latency p99'), ms('latency.max', 'start latency max', false));
  for (const size of profile.backlog.sizes) {
    defs.push(rate(`backlog.${sizeLabel(size)}.shared`, `claim rate, ${sizeLabel(size)} queued, one run_at`));
    defs.push(rate(`backlog.${sizeLabel(size)}.spread`, `claim rate, ${sizeLabel(size)} queued, spread run_at`));
  }
  defs.push(
    rate('steady.throughput', `steady state, ${sizeLabel(profile.steady.jobs)} through (enqueue + process)`),
    { id: 'steady.tableStartMB', label: 'job table at start', unit: 'MB', better: 'info', digits: 2, chart: false },
    { id: 'steady.tableEndMB', label: 'job table at end', unit: 'MB', better: 'info', digits: 1, chart: false },
    { id: 'steady.indexStartMB', label: 'its indexes at start', unit: 'MB', better: 'info', digits: 2, chart: false },
    { id: 'steady.indexEndMB', label: 'its indexes at end', unit: 'MB', better: 'info', digits: 1, chart: false },
    { id: 'steady.rowsEnd', label: 'rows kept at end (retention)', unit: 'rows', better: 'info', digits: 0, chart: false },
    { id: 'steady.peakRssMB', label: 'worker RSS, peak', unit: 'MB', better: 'lower', digits: 0, chart: true },
    { id: 'steady.idleRssMB', label: 'worker RSS, idle after', unit: 'MB', better: 'lower', digits: 0, chart: false },
    { id: 'steady.bootRssMB', label: '  worker RSS after boot, before any job', unit: 'MB', better: 'info', digits: 0, chart: false },
    { id: 'steady.idleHeapUsedMB', label: '  V8 heap in use, idle after', unit: 'MB', better: 'info', digits: 1, chart: false },
    { id: 'steady.idleHeapTotalMB', label: '  V8 heap reserved, idle after', unit: 'MB', better: 'info', digits: 1, chart: false },
    { id: 'steady.idleStatementsPerSec', label: 'statements/s while idle', unit: '1/s', better: 'lower', digits: 2, chart: true },
  );
  for (const p of profile.scaleOut.processes) defs.push(rate(`scaleout.p${p}`, `scale-out, ${p} process${p > 1 ? 'es' : ''} x c${profile.scaleOut.concurrency}`));
  const l = profile.limits;
  const where = `${sizeLabel(l.jobs)}, ${l.processes} processes x c${l.concurrency}, no prefetch`;
  defs.push(rate('limits.none', `limits: none (reference), ${where}`));
  for (const n of l.global) defs.push(rate(`limits.global${n}`, `limits: globalConcurrency ${n}, ${where}`));
  defs.push(rate(`limits.perKey1x${l.keys}`, `limits: concurrencyPerKey 1, ${l.keys.toLocaleString('en-US')} keys, ${where}`));
  return defs;
}

/** Sanity counters: handler calls beyond the job count (a job run twice). Expected 0 everywhere. */
export function isSanityMetric(id: string): boolean {
  return id.endsWith('.extraRuns');
}
