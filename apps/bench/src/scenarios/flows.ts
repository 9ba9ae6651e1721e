import { FLOW_SHAPES, shapeJobs, shapeSupport, type FlowShape, type ShapeSizes } from '../adapters/flow-shapes.js';
import { PRODUCER_POOL_SIZE, workerPoolSize, type Profile } from '../config.js';
import { checkpoint, deadlockCount, withFreshDatabase } from '../db/databases.js';
import { withClient } from '../db/sql.js';
import type { FlowReport } from '../host/protocol.js';
import { SystemProcess } from '../host/system-process.js';
import type { SystemInfo } from '../systems.js';
import { databaseName, type Figures, type ScenarioContext } from './context.js';
import { percentile } from './latency.js';
import { waitUntilDone } from './wait-until-done.js';

/** One cell of the flows scenario: a shape at a worker concurrency. */
export interface FlowsVariant {
  shape: FlowShape;
  concurrency: number;
  /** Metric id prefix, e.g. flows.chain10.c10. */
  metric: string;
}

/** Concurrent callers of the flow API while the flows are enqueued (app requests side by side). */
const FLOW_CALLERS = 8;

/** The shape's name in metric ids: its size is part of it, so a table of other sizes never mixes with this one. */
export function shapeMetric(shape: FlowShape, profile: Profile): string {
  const f = profile.flows;
  return shape === 'chain' ? `chain${f.chainLength}` : shape === 'fan' ? `fan${f.fanWidth >= 1000 ? `${f.fanWidth / 1000}k` : f.fanWidth}` : 'diamond';
}

/** Flows per cell: many small flows at once (chains, diamonds), a few big ones (the fan). */
export function flowCount(shape: FlowShape, profile: Profile): number {
  const f = profile.flows;
  return shape === 'chain' ? f.chains : shape === 'fan' ? f.fans : f.diamonds;
}

export function flowsVariants(profile: Profile): FlowsVariant[] {
  return FLOW_SHAPES.flatMap((shape) => profile.flows.concurrencies.map((concurrency) => ({ shape, concurrency, metric: `flows.${shapeMetric(shape, profile)}.c${concurrency}` })));
}

/** Systems with flows whose model can express the shape (BullMQ's trees: no diamond). */
export function flowsSupported(system: SystemInfo, shape: FlowShape): boolean {
  return system.flows !== undefined && shapeSupport(shape, system.flows.model) !== 'no';
}

interface FlowCheck {
  jobs: number;
  completed: number;
  once: number;
  flows: number;
}

/**
 * Flows of a shape at once in the light phase: few enough that the ready jobs never outnumber the worker's slots
 * (a chain has one ready job at a time, a diamond two), so a dependent never waits for a free slot and its latency
 * is the hop alone; and the same few at every concurrency (10 ready jobs at most), so that on a small machine c50
 * does not turn the light phase into a CPU-bound one. None for the fan: its 1,000 children are released together
 * and queue for the slots whatever else runs.
 */
export function lightFlowCount(shape: FlowShape, concurrency: number): number {
  return shape === 'chain' ? Math.min(10, concurrency) : shape === 'diamond' ? Math.max(1, Math.min(5, Math.floor(concurrency / 2))) : 0;
}

/**
 * Flows: jobs that depend on jobs, one shape per cell. Every flow is enqueued first, one flow API call per flow
 * from 8 concurrent callers in a producer process (an API instance), so that all of them wait when the worker
 * starts: the process scenario's pre-filled queue, for flows. Then one worker process at the cell's concurrency
 * runs them; flows/s is timed from its first handler start until the database shows no flow job unfinished, like
 * the process scenario. Every dependent reads its parents' results through its library's own API, as an app's
 * would, and checks they are its parents' (each job returns its ref).
 *
 * Job-to-dependent latency: for each dependent, its handler's start minus the end of its last parent's handler
 * (the one that released it), both on the worker process's clock. Handler-side, not the tables' timestamps:
 * nestjs-pg-queue records no start time (locked_at is the claim, which read-ahead makes earlier than the start),
 * and every system records a completion when its settle lands, not when the handler returned; a settle that waits
 * for a batch is part of what a dependent waits for, so the hop is measured from the handler's return. Taken twice:
 * - under load, in the timed run: with hundreds of flows at once most ready jobs wait for a free slot, so this is
 *   mostly queueing (the same for every system at the same concurrency) plus the hop;
 * - light: then the same worker, idle, gets a few flows at once (lightFlowCount: ready jobs never outnumber the
 *   slots), enqueued from its own process as an app would; this is the hop alone: settle, unblock, wake-up, claim.
 *
 * Exactly once, from the tables: every row of the queue completed, after one attempt (never retried, never
 * started twice), and as many flows completed as were enqueued; from the handlers: one start per job, and every
 * parent's result read. Any miss fails the cell with what was found (a bug, not a figure).
 */
export async function flowsScenario(ctx: ScenarioContext, system: SystemInfo, variant: FlowsVariant): Promise<Figures> {
  if (!flowsSupported(system, variant.shape)) return {};
  const { model, busySql, checkSql } = system.flows!;
  const { shape, concurrency, metric } = variant;
  const sizes: ShapeSizes = { chainLength: ctx.profile.flows.chainLength, fanWidth: ctx.profile.flows.fanWidth };
  const count = flowCount(shape, ctx.profile);
  const light = lightFlowCount(shape, concurrency);
  const perFlow = shapeJobs(shape, sizes, model);
  const jobs = count * perFlow.length;
  const dependents = perFlow.filter((job) => job.parents.length > 0).length;
  const name = databaseName(`fl${shape}${concurrency}`, system.id, ctx.run);
  return withFreshDatabase(ctx.serverUrl, name, async (url) => {
    const producer = await SystemProcess.start({ system: system.id, url, role: 'producer', concurrency: 1, poolSize: PRODUCER_POOL_SIZE });
    let enqueueMs: number;
    try {
      enqueueMs = (await producer.send({ cmd: 'enqueue-flows', shape, sizes, from: 0, flows: count, callers: FLOW_CALLERS })).ms;
    } finally {
      await producer.stop();
    }
    await checkpoint(ctx.serverUrl);
    const worker = await SystemProcess.start({ system: system.id, url, role: 'worker', concurrency, poolSize: workerPoolSize(concurrency), flows: true });
    let figures: Figures;
    try {
      const done = await waitUntilDone([worker], url, busySql, jobs, 600_000);
      const loaded = await worker.send({ cmd: 'flow-report', shape, sizes, model, from: 0, flows: count });
      check(loaded, count * perFlow.length, count * dependents, `${system.id} ${metric}`);
      const underLoad = [...loaded.latencies].sort((a, b) => a - b);
      figures = {
        [metric]: (count / (done.doneAt - done.firstAt)) * 1000,
        [`${metric}.p50`]: percentile(underLoad, 50),
        [`${metric}.p99`]: percentile(underLoad, 99),
        [`${metric}.enqueue`]: (count / enqueueMs) * 1000,
        [`${metric}.extraRuns`]: done.handled - jobs,
      };
      if (light > 0) {
        await worker.send({ cmd: 'enqueue-flows', shape, sizes, from: count, flows: light, callers: light });
        const lightDone = await waitUntilDone([worker], url, busySql, jobs + light * perFlow.length, 600_000);
        const report = await worker.send({ cmd: 'flow-report', shape, sizes, model, from: count, flows: light });
        check(report, light * perFlow.length, light * dependents, `${system.id} ${metric} (light)`);
        const hops = [...report.latencies].sort((a, b) => a - b);
        figures[`${metric}.lightP50`] = percentile(hops, 50);
        figures[`${metric}.lightP99`] = percentile(hops, 99);
        figures[`${metric}.extraRuns`] = lightDone.handled - jobs - light * perFlow.length;
      }
    } finally {
      await worker.stop();
    }
    // Read once the worker has stopped: every settle it had in flight has landed.
    const total = jobs + light * perFlow.length;
    const row = await withClient(url, async (c) => (await c.query<FlowCheck>(checkSql)).rows[0]);
    if (row.jobs !== total || row.completed !== total || row.once !== total || row.flows !== count + light) {
      throw new Error(
        `${system.id} ${metric}: the tables show ${row.jobs} jobs (${total} enqueued), ${row.completed} completed, ${row.once} completed after one attempt, ${row.flows} of ${count + light} flows completed`,
      );
    }
    figures[`${metric}.deadlocks`] = await deadlockCount(ctx.serverUrl, name);
    return figures;
  });
}

/** What the handlers saw of some flows: every job started once, every dependent read its parents and has a latency. */
function check(report: FlowReport, jobs: number, dependents: number, what: string): void {
  const problems = [
    report.started !== jobs && `${report.started} of ${jobs} flow jobs started`,
    report.duplicateStarts !== 0 && `${report.duplicateStarts} handler starts of a job that had started already`,
    report.parentsRead !== report.parentsExpected && `the dependents read ${report.parentsRead} of their ${report.parentsExpected} parents' results`,
    report.latencies.length !== dependents && `${report.latencies.length} of ${dependents} dependents have a latency (a parent or the dependent never ran)`,
  ].filter(Boolean);
  if (problems.length) throw new Error(`${what}: ${problems.join('; ')}`);
}
