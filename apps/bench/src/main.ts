/**
 * `npm run bench`: starts its own durable embedded PostgreSQL, runs every scenario for every system one
 * after another (each on a fresh database), repeats the whole thing `runs` times, prints one table with
 * medians and ratios, checks the issue's targets, and writes JSON, text and an SVG chart under results/.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { DEFAULTS_ID, type SystemId } from './adapters/types.js';
import { parseCli, type BenchOptions } from './cli.js';
import { type ScenarioName } from './config.js';
import { serverInfo, startBenchServer, type ServerInfo } from './db/server.js';
import { pinSelf, pinServer, planPinning } from './host/pin-cpus.js';
import { setStatementTracking } from './db/statements.js';
import { nowMs } from './host/clock.js';
import { killAllChildren } from './host/system-process.js';
import { aggregate, runRatios, type Sample } from './report/aggregate.js';
import { buildFingerprint } from './report/build-fingerprint.js';
import { formatNumber, sizeLabel } from './report/format.js';
import { machineInfo, type MachineInfo } from './report/machine.js';
import { metricCatalog } from './report/metrics.js';
import { renderStatements, type StatementRecord } from './report/statements.js';
import { renderSvg } from './report/svg.js';
import { renderTable } from './report/table.js';
import { checkTargets, renderTargets } from './report/targets.js';
import { backlogScenario } from './scenarios/backlog.js';
import type { Figures, ScenarioContext } from './scenarios/context.js';
import { enqueueScenario } from './scenarios/enqueue.js';
import { interleavedEnqueueScenario } from './scenarios/interleaved-enqueue.js';
import { fairnessScenario, fairnessSupported, fairnessVariants } from './scenarios/fairness.js';
import { flowsScenario, flowsSupported, flowsVariants } from './scenarios/flows.js';
import { latencyScenario } from './scenarios/latency.js';
import { limitsScenario, limitsSupported, limitsVariants } from './scenarios/limits.js';
import { modesScenario, modesVariants } from './scenarios/modes.js';
import { processScenario } from './scenarios/process.js';
import { scaleOutScenario } from './scenarios/scale-out.js';
import { spreadScenario } from './scenarios/spread.js';
import { steadyStateScenario } from './scenarios/steady-state.js';
import { memoryScenario } from './scenarios/memory.js';
import { installedVersion, SYSTEMS, type SystemInfo } from './systems.js';

const RESULTS = fileURLToPath(new URL('../results/', import.meta.url));

interface Step {
  scenario: ScenarioName;
  label: string;
  run?: (ctx: ScenarioContext, system: SystemInfo) => Promise<Figures>;
  /** Instead of run: one call for all the step's systems at once (their figures by system). */
  runAll?: (ctx: ScenarioContext, systems: SystemInfo[]) => Promise<Map<SystemId, Figures>>;
  /** The systems this step runs for (of those selected); default: all but pg-queue-defaults. */
  only?: SystemId[];
}

/** Scenarios that compare nestjs-pg-queue's tuned settings with a bare handler's run for these two only. */
const TUNED_VS_DEFAULTS: SystemId[] = ['pg-queue', DEFAULTS_ID];

function runsFor(step: Step, system: SystemId): boolean {
  return step.only ? step.only.includes(system) : system !== DEFAULTS_ID;
}

/** The variants of each selected scenario, in the order they run within one repetition. */
function steps(options: BenchOptions): Step[] {
  const p = options.profile;
  const out: Step[] = [];
  for (const scenario of options.scenarios) {
    switch (scenario) {
      case 'enqueue':
        out.push({ scenario, label: 'enqueue', run: enqueueScenario });
        break;
      case 'interleaved':
        out.push({ scenario, label: 'enqueue interleaved', runAll: interleavedEnqueueScenario });
        break;
      case 'process':
        for (const c of p.process.concurrencies) out.push({ scenario, label: `process c=${c}`, run: (ctx, s) => processScenario(ctx, s, c) });
        break;
      case 'defaults':
        for (const c of p.defaults.concurrencies) {
          out.push({ scenario, label: `defaults c=${c}`, run: (ctx, s) => processScenario(ctx, s, c, 'defaults'), only: TUNED_VS_DEFAULTS });
        }
        break;
      case 'spread':
        for (const d of p.spread.durations) {
          const only = options.spreadPeers ? [...TUNED_VS_DEFAULTS, 'pg-boss', 'graphile-worker', 'bullmq', 'plain-sql'] satisfies SystemId[] : TUNED_VS_DEFAULTS;
          out.push({ scenario, label: `spread ${d.jobMs} ms`, run: (ctx, s) => spreadScenario(ctx, s, d.jobMs, d.jobs), only });
        }
        break;
      case 'latency':
        out.push({ scenario, label: 'latency', run: latencyScenario });
        break;
      case 'backlog':
        for (const size of p.backlog.sizes) {
          for (const spread of [false, true]) {
            out.push({ scenario, label: `backlog ${sizeLabel(size)} ${spread ? 'spread' : 'shared'}`, run: (ctx, s) => backlogScenario(ctx, s, size, spread) });
          }
        }
        break;
      case 'steady':
        out.push({ scenario, label: 'steady state', run: steadyStateScenario });
        break;
      case 'memory':
        out.push({ scenario, label: 'memory', run: memoryScenario });
        break;
      case 'scaleout':
        for (const n of p.scaleOut.processes) out.push({ scenario, label: `scale-out x${n}`, run: (ctx, s) => scaleOutScenario(ctx, s, n) });
        break;
      case 'limits':
        // Limits across instances: only the systems that have the variant's limit (SystemInfo.limits).
        for (const v of limitsVariants(p)) {
          const only = options.systems.filter((id) => limitsSupported(SYSTEMS[id], v));
          out.push({ scenario, label: v.metric, run: (ctx, s) => limitsScenario(ctx, s, v), only });
        }
        break;
      case 'flows':
        // Jobs that depend on jobs: only the systems with flows (SystemInfo.flows: not graphile-worker, not the
        // plain loop), and of those only the ones whose flows can express the shape (BullMQ's trees: no diamond).
        for (const v of flowsVariants(p)) {
          const only = options.systems.filter((id) => flowsSupported(SYSTEMS[id], v.shape));
          out.push({ scenario, label: v.metric, run: (ctx, s) => flowsScenario(ctx, s, v), only });
        }
        break;
      case 'fairness':
        // Fair share across keys: only the systems that have it (SystemInfo.limits: nestjs-pg-queue alone).
        for (const v of fairnessVariants(p)) {
          const only = options.systems.filter((id) => fairnessSupported(SYSTEMS[id]));
          out.push({ scenario, label: v.metric, run: (ctx, s) => fairnessScenario(ctx, s, v), only });
        }
        break;
      case 'modes':
        // Batch handlers, durable steps, transactional handlers: each cell for the systems that have its shape.
        for (const v of modesVariants()) {
          out.push({ scenario, label: v.metric, run: (ctx, s) => modesScenario(ctx, s, v), only: options.systems.filter((id) => v.systems.includes(id)) });
        }
        break;
    }
  }
  return out;
}

/** Run r starts with a different system, so that no system always goes first (or always follows the same one). */
function rotate<T>(items: T[], by: number): T[] {
  const k = by % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}

function summary(figures: Figures): string {
  return Object.entries(figures)
    .filter(([k, v]) => !(k.endsWith('.extraRuns') || k.endsWith('deadlocks')) || v !== 0)
    .map(([k, v]) => `${k.split('.').slice(1).join('.') || k}=${formatNumber(v, v >= 100 ? 0 : 2)}`)
    .join(' ');
}

async function main(): Promise<void> {
  const options = parseCli(process.argv.slice(2));
  const log = (message: string) => console.log(message);
  const machine = machineInfo();
  const versions: Partial<Record<SystemId, string>> = {};
  for (const id of options.systems) versions[id] = SYSTEMS[id].packageName ? installedVersion(SYSTEMS[id].packageName!) : '-';

  const started = nowMs();
  const buildAtStart = buildFingerprint();
  log(`nestjs-pg-queue benchmark: profile ${options.profile.name}, ${options.runs} run(s), scenarios ${options.scenarios.join(', ')}${options.futureJobs > 0 ? `, backlog with ${sizeLabel(options.futureJobs)} future jobs` : ''}`);
  log(`machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGB} GB, ${machine.os}, Node ${machine.node}, commit ${machine.gitCommit}`);
  log(`PostgreSQL: ${options.pg.source}`);
  const server = await startBenchServer(log, options.pg);
  if (options.pin) {
    const pinning = planPinning();
    const pids = pinServer(server.dataDir!, pinning.server);
    pinSelf(pinning.node);
    log(`pinned: PostgreSQL (${pids.length} processes, and its later backends) on CPU ${pinning.server}; the benchmark's Node processes on CPU ${pinning.node}`);
  }
  const stopServer = async () => {
    killAllChildren();
    await server.stop().catch(() => undefined);
  };
  process.once('SIGINT', () => void stopServer().finally(() => process.exit(130)));
  process.once('SIGTERM', () => void stopServer().finally(() => process.exit(143)));

  const samples: Sample[] = [];
  const failures: { run: number; system: SystemId; step: string; error: string }[] = [];
  const statementRecords: StatementRecord[] = [];
  let info: ServerInfo;
  try {
    info = await serverInfo(server.url);
    if (options.pg.major !== undefined && info.major !== options.pg.major) {
      throw new Error(`--pg ${options.pg.major} asked for PostgreSQL ${options.pg.major}, but the server started is ${info.major} (${info.version})`);
    }
    log(`${info.version}; ${Object.entries(info.settings).map(([k, v]) => `${k}=${v}`).join(', ')}`);
    for (const id of options.systems) log(`  ${SYSTEMS[id].label} ${versions[id]}: ${SYSTEMS[id].settings}`);
    if (options.scenarios.includes('flows')) {
      for (const id of options.systems) if (SYSTEMS[id].flows) log(`  ${SYSTEMS[id].label}, flows: ${SYSTEMS[id].flows!.settings}`);
    }
    if (options.statements) await setStatementTracking(server.url, true);
    const plan = steps(options);
    const contextOf = (run: number): ScenarioContext => ({
      serverUrl: server.url,
      profile: options.profile,
      run,
      statements: options.statements,
      futureJobs: options.futureJobs,
      log,
      keepStatements: (system, label, statements, jobs) => statementRecords.push({ run, system, label, jobs, statements: [...statements].sort((a, b) => b.calls - a.calls).slice(0, 25) }),
    });
    for (let run = 1; run <= options.runs; run++) {
      const order = rotate(options.systems, run - 1);
      for (const step of plan) {
        const ids = order.filter((s) => runsFor(step, s));
        if (step.runAll) {
          const t0 = nowMs();
          try {
            const bySystem = await step.runAll(contextOf(run), ids.map((id) => SYSTEMS[id]));
            for (const [id, figures] of bySystem) {
              for (const [metric, value] of Object.entries(figures)) samples.push({ run, system: id, metric, value });
              log(`[run ${run}/${options.runs}] ${step.label.padEnd(20)} ${SYSTEMS[id].label.padEnd(16)} ${summary(figures)}`);
            }
            log(`[run ${run}/${options.runs}] ${step.label} took ${((nowMs() - t0) / 1000).toFixed(1)} s`);
          } catch (error) {
            const text = error instanceof Error ? error.message : String(error);
            for (const id of ids) failures.push({ run, system: id, step: step.label, error: text });
            log(`[run ${run}/${options.runs}] ${step.label.padEnd(20)} FAILED: ${text.split('\n')[0]}`);
            killAllChildren();
          }
          continue;
        }
        for (const id of ids) {
          const ctx = contextOf(run);
          const t0 = nowMs();
          try {
            const figures = await step.run!(ctx, SYSTEMS[id]);
            for (const [metric, value] of Object.entries(figures)) samples.push({ run, system: id, metric, value });
            log(`[run ${run}/${options.runs}] ${step.label.padEnd(20)} ${SYSTEMS[id].label.padEnd(16)} ${summary(figures)}  (${((nowMs() - t0) / 1000).toFixed(1)} s)`);
          } catch (error) {
            const text = error instanceof Error ? error.message : String(error);
            failures.push({ run, system: id, step: step.label, error: text });
            log(`[run ${run}/${options.runs}] ${step.label.padEnd(20)} ${SYSTEMS[id].label.padEnd(16)} FAILED: ${text.split('\n')[0]}`);
            killAllChildren();
          }
        }
      }
    }
  } finally {
    await stopServer();
  }

  const buildAtEnd = buildFingerprint();
  const build = buildAtStart === buildAtEnd ? buildAtStart : `${buildAtStart} -> ${buildAtEnd}`;
  const aggregates = aggregate(samples);
  const ratios = runRatios(samples, 'pg-queue');
  const defs = metricCatalog(options.profile);
  const table = renderTable(defs, aggregates, ratios, options.systems);
  const targets = options.systems.includes('pg-queue') ? checkTargets(aggregates, ratios, options.profile) : [];
  const minutes = (nowMs() - started) / 60_000;
  const header = describe(options, machine, info!, versions, minutes, build);
  const text = [
    ...header,
    ...(buildAtStart === buildAtEnd
      ? []
      : ['', `WARNING: the compiled library or benchmark changed during the run (build ${build}): later samples ran other code than earlier ones.`]),
    '',
    `Medians of ${options.runs} run(s), ±half the min-max range. Ratios: ours / peer within each run, the median of the runs and (with several) the lowest-highest single run (↑: above 1 is better for us, ↓: below 1 is).`,
    '',
    table,
    '',
    ...(targets.length ? ['Targets (issues 4 and 12; the median of the per-run ratios, lowest-highest run in brackets):', renderTargets(targets), ''] : []),
    ...sanityNote(samples),
    ...(statementRecords.length ? ['What each system sent to PostgreSQL (pg_stat_statements):', renderStatements(statementRecords, options.profile.steady.idleWindowMs), ''] : []),
    ...(failures.length ? ['Failures:', ...failures.map((f) => `  run ${f.run} ${f.step} ${f.system}: ${f.error.split('\n')[0]}`), ''] : []),
  ].join('\n');
  console.log(`\n${text}`);

  const dir = options.complete ? RESULTS : `${RESULTS}tmp/`;
  // Named by the major version, so runs on PostgreSQL 15 and 18 sit side by side.
  const base = `${options.complete ? 'latest' : 'partial'}-pg${info!.major}`;
  await mkdir(dir, { recursive: true });
  const json = { options: { ...options, profile: options.profile }, machine, build, postgres: info!, versions, minutes, samples, aggregates, targets, failures, statements: statementRecords };
  await writeFile(`${dir}${base}.json`, `${JSON.stringify(json, null, 2)}\n`);
  await writeFile(`${dir}${base}.txt`, `${text}\n`);
  await writeFile(`${dir}${base}.svg`, `${renderSvg(defs, aggregates, ratios, options.systems, `nestjs-pg-queue vs pg-boss vs graphile-worker vs BullMQ (pg) vs a plain SQL loop, PostgreSQL ${info!.major}`, header.slice(1, 5))}\n`);
  console.log(`wrote ${dir}${base}.json, ${base}.txt, ${base}.svg`);
  if (failures.length) process.exitCode = 1;
}

function describe(
  options: BenchOptions,
  machine: MachineInfo,
  info: ServerInfo,
  versions: Partial<Record<SystemId, string>>,
  minutes: number,
  build: string,
): string[] {
  const s = info.settings;
  const pinning = options.pin ? planPinning() : undefined;
  return [
    `nestjs-pg-queue benchmark on PostgreSQL ${info.major}`,
    `${options.runs} run(s), profile ${options.profile.name}, ${minutes.toFixed(1)} min; ${machine.cpu} x${machine.cores}, ${machine.memoryGB} GB RAM, ${machine.os}, Node ${machine.node}`,
    `${info.version.split(' on ')[0]} (${options.pg.source}), fsync=${s.fsync}, synchronous_commit=${s.synchronous_commit}, full_page_writes=${s.full_page_writes}, shared_buffers=${s.shared_buffers}, max_wal_size=${s.max_wal_size}; ${pinning ? `pinned (--pin): PostgreSQL on CPU ${pinning.server}, Node on CPU ${pinning.node}` : 'PostgreSQL and Node share the same cores'}`,
    options.systems.map((id) => `${SYSTEMS[id].label} ${versions[id]}`).join(', '),
    `commit ${machine.gitCommit}, build ${build}; 1-min load average ${machine.loadAtStart} at start, ${loadavg()[0].toFixed(2)} at end (${machine.cores} cores: more means other work competed for CPU)`,
  ];
}

/** Sanity counters: jobs run twice (handler calls beyond the job count) and deadlocks PostgreSQL detected. */
function sanityNote(samples: Sample[]): string[] {
  const lines: string[] = [];
  const extra = samples.filter((s) => s.metric.endsWith('.extraRuns') && s.value !== 0);
  if (extra.length === 0) lines.push('Every job ran exactly once in every throughput scenario (handler calls = jobs).');
  else lines.push('Jobs that ran more than once (handler calls - jobs):', ...extra.map((s) => `  run ${s.run} ${s.system} ${s.metric}: ${s.value}`));
  const deadlocks = samples.filter((s) => s.metric.endsWith('deadlocks') && s.value !== 0);
  if (deadlocks.length === 0) lines.push('PostgreSQL detected no deadlock in any throughput scenario.');
  else lines.push('Deadlocks PostgreSQL detected (each stalls two statements for deadlock_timeout = 1 s):', ...deadlocks.map((s) => `  run ${s.run} ${s.system} ${s.metric}: ${s.value}`));
  return [...lines, ''];
}

main().catch((error: unknown) => {
  console.error(error);
  killAllChildren();
  process.exit(1);
});
