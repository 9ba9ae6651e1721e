import { shapeSupport, type FlowShape } from '../adapters/flow-shapes.js';
import type { SystemId } from '../adapters/types.js';
import type { Profile } from '../config.js';
import { flowCount, flowsVariants, lightFlowCount } from '../scenarios/flows.js';
import { modesVariants } from '../scenarios/modes.js';
import { spreadMetric } from '../scenarios/spread.js';
import { MEMORY_STEPS } from '../host/protocol.js';
import { SYSTEMS } from '../systems.js';
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
  /**
   * What a system's cell in this row means when it is not the row's measurement (another shape, or none):
   * the table marks the cell and prints the text under the table.
   */
  notes?: Partial<Record<SystemId, string>>;
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
    // The same cells with every system's producer alive at once, slices taken in turn (scenarios/interleaved-enqueue.ts).
    rate('mixed.sequential.fresh', `enqueue interleaved, one call at a time, fresh process (its first ${e.sequential.toLocaleString('en-US')})`),
    rate('mixed.sequential', `enqueue interleaved, one call at a time, after ${e.warmMs / 1000} s of calls`),
    rate('mixed.concurrent', `enqueue interleaved, ${e.callers} concurrent callers`),
    ...e.bulkBatches.map((b) => rate(`mixed.bulk.${sizeLabel(b)}`, `enqueue interleaved, bulk (${b.toLocaleString('en-US')} per call)`)),
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
  defs.push(
    ms('latencyRemote.p50', 'start latency p50, enqueued from another process', false),
    ms('latencyRemote.p95', 'start latency p95, enqueued from another process', false),
    ms('latencyRemote.p99', 'start latency p99, enqueued from another process', false),
    ms('latencyRemote.max', 'start latency max, enqueued from another process', false),
  );
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
  // Memory (scenarios/memory.ts): every figure after two full GCs, so the heap is what the process keeps.
  const mem = (id: string, label: string, better: MetricDef['better'] = 'lower', chart = false): MetricDef => ({ id, label, unit: 'MB', better, digits: 1, chart });
  const m = sizeLabel(profile.memory.jobs);
  defs.push(
    mem('memory.boot.rssMB', 'worker RSS after boot, before any job (after GC)', 'lower', true),
    mem('memory.boot.heapMB', '  V8 heap in use after boot (after GC)'),
    mem('memory.after.rssMB', `worker RSS after ${m} jobs through (after GC)`, 'lower', true),
    mem('memory.after.heapMB', `  V8 heap in use after ${m} jobs (after GC)`),
    mem('memory.heapGrowthMB', `  heap growth over the ${m} jobs`, 'info'),
    mem('memory.after.externalMB', `  external (Buffers, C++) after ${m} jobs`, 'info'),
    mem('memory.peakRssMB', `worker RSS, peak during the ${m} jobs`),
    ...MEMORY_STEPS.map((step, i) => mem(`memory.parts.${i}`, i === 0 ? `  nestjs-pg-queue's boot heap, step by step: ${step}` : `    + ${step}`, 'info')),
  );
  for (const p of profile.scaleOut.processes) defs.push(rate(`scaleout.p${p}`, `scale-out, ${p} process${p > 1 ? 'es' : ''} x c${profile.scaleOut.concurrency}`));
  const l = profile.limits;
  const where = `${sizeLabel(l.jobs)}, ${l.processes} processes x c${l.concurrency}, no prefetch`;
  defs.push(rate('limits.none', `limits: none (reference), ${where}`));
  for (const n of l.global) defs.push(rate(`limits.global${n}`, `limits: globalConcurrency ${n}, ${where}`));
  defs.push(rate(`limits.perKey1x${l.keys}`, `limits: concurrencyPerKey 1, ${l.keys.toLocaleString('en-US')} keys, ${where}`));
  const fr = profile.fairness;
  const fairWhere = `${fr.processes} processes x c${fr.concurrency}, ${fr.jobMs} ms jobs, no read-ahead`;
  defs.push(
    info('fair.tenants.worstRatio', `fairness: 1 key of ${sizeLabel(fr.bigJobs)} then ${fr.smallTenants} keys of ${fr.smallJobs}, ${fairWhere}: worst small key's finish / its fair share`, 'x', 2),
    info('fair.tenants.medianRatio', `  median small key's finish / its fair share`, 'x', 2),
    info('fair.tenants.worstRatioMeasured', `  worst small key's finish / its fair share at the measured time per job and slot`, 'x', 2),
    info('fair.tenants.worstMs', `  worst small key's last finish after their enqueue`, 'ms', 0),
    info('fair.tenants.fairMs', `  its fair share: ${fr.smallJobs} jobs x ${fr.jobMs} ms x ${fr.smallTenants + 1} keys / ${fr.processes * fr.concurrency} slots`, 'ms', 0),
    info('fair.tenants.slotMsPerJob', `  measured time per job and slot in that window (job, claim, settle)`, 'ms', 1),
    info('fair.tenants.bigShare', `  the big key's share of the jobs finished in that window (fair: ${(100 / (fr.smallTenants + 1)).toFixed(1)}%)`, '%', 1),
    rate('fair.only.plain', `fairness: one key alone, ${sizeLabel(fr.jobs)}, ${fairWhere}: no fairness (reference)`, false),
    rate('fair.only.plainReadAhead', `  no fairness, the library's default read-ahead`, false),
    rate('fair.only.perKey', `  concurrencyPerKey ${fr.processes * fr.concurrency} (the keyed claim, never binding)`, false),
    rate('fair.only.fair', `  fairness: true`, false),
    rate('fair.only.fairNoReadAhead', `  fairness: true, prefetch: 0 (no read-ahead)`, false),
    rate('fair.only1p.plain', `  the same slots in 1 process (no turns at the lock between processes): no fairness, no read-ahead`, false),
    rate('fair.only1p.fair', `  the same slots in 1 process: fairness: true`, false),
    info('fair.weights.ratio', `fairness: weights 3:1, two keys of ${sizeLabel(fr.weightedJobs)} each, ${fairWhere}: heavy / light starts while both had work`, 'x', 2),
    info('fair.weights.heavyShare', `  the heavy key's share of those starts (3:1 is 75%)`, '%', 1),
  );
  for (const v of flowsVariants(profile)) {
    const notes = flowNotes(v.shape, profile);
    // A row with a note compares different things (or nothing) for that system: not drawn as bars side by side.
    const chart = Object.keys(notes).length === 0;
    const n = flowCount(v.shape, profile).toLocaleString('en-US');
    const f = profile.flows;
    const what = v.shape === 'chain' ? `${n} chains of ${f.chainLength}` : v.shape === 'fan' ? `${n} fan-outs of ${f.fanWidth.toLocaleString('en-US')} + fan-in` : `${n} diamonds`;
    defs.push(
      { id: v.metric, label: `flows: ${what}, c${v.concurrency}`, unit: 'flows/s', better: 'higher', digits: 1, chart, notes },
      { ...ms(`${v.metric}.p50`, `  job-to-dependent latency under load p50`, false), notes },
      { ...ms(`${v.metric}.p99`, `  job-to-dependent latency under load p99`, false), notes },
      ...(lightFlowCount(v.shape, v.concurrency) > 0
        ? [
            { ...ms(`${v.metric}.lightP50`, `  job-to-dependent latency, ${lightFlowCount(v.shape, v.concurrency)} flows at once, p50`, chart), notes },
            { ...ms(`${v.metric}.lightP99`, `  job-to-dependent latency, ${lightFlowCount(v.shape, v.concurrency)} flows at once, p99`, false), notes },
          ]
        : []),
      { id: `${v.metric}.enqueue`, label: `  enqueue, 8 callers, one flow per call`, unit: 'flows/s', better: 'higher', digits: 0, chart: false, notes },
    );
  }
  const labels: Record<string, string> = {
    'modes.single.c100': 'one job per call, 100 in flight',
    'modes.batch100': 'batch handler, 100 jobs per call, one call at a time',
    'modes.steps0.c10': 'no durable step per job, c10',
    'modes.steps1.c10': '1 durable step per job, c10',
    'modes.steps5.c10': '5 durable steps per job, c10',
    'modes.tx.c10': 'transactional handler (completion in its transaction), c10',
  };
  for (const v of modesVariants()) {
    defs.push(rate(v.metric, `process ${sizeLabel(profile.process.jobs)}: ${labels[v.metric] ?? v.metric}`, false));
    defs.push({ id: `${v.metric}.cpuUsPerJob`, label: `  machine CPU per job (Node and PostgreSQL)`, unit: 'µs', better: 'lower', digits: 1, chart: false });
  }
  return defs;
}

/** Systems with flows that cannot run a shape as planned (BullMQ's trees): what their cell holds instead. */
function flowNotes(shape: FlowShape, profile: Profile): Partial<Record<SystemId, string>> {
  const notes: Partial<Record<SystemId, string>> = {};
  for (const system of Object.values(SYSTEMS)) {
    if (!system.flows) continue;
    const support = shapeSupport(shape, system.flows.model);
    if (support === 'fanInOnly') {
      notes[system.id] = `the fan-in alone (${profile.flows.fanWidth.toLocaleString('en-US')} jobs, then the sink; no root): its flows are trees, a job has one parent, so one root cannot fan out; no ratio (n/c): not the same shape`;
    } else if (support === 'no') {
      notes[system.id] = `not expressible: its flows are trees (a job has one parent), and a diamond's top has two dependents`;
    }
  }
  return notes;
}

/** Sanity counters: handler calls beyond the job count (a job run twice). Expected 0 everywhere. */
export function isSanityMetric(id: string): boolean {
  return id.endsWith('.extraRuns');
}
