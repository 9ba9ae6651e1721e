import type { BenchPayload } from './bench-payload.js';

/**
 * The flows scenario's shapes, as plain data every adapter turns into its own library's flow call and the
 * host reads back to pair each dependent with its parents (job-to-dependent latency). Pure: no library here.
 */

export const FLOW_SHAPES = ['chain', 'fan', 'diamond'] as const;
export type FlowShape = (typeof FLOW_SHAPES)[number];

/** One job of one flow: its ref (unique within the flow) and the refs it waits for. */
export interface FlowShapeJob {
  ref: string;
  parents: string[];
}

/** A flow job's payload: the benchmark's index, the flow's number in the run, its ref and its parent count. */
export interface FlowPayload extends BenchPayload {
  f: number;
  r: string;
  /** How many parents' results the handler must read back (0 for a root). */
  p: number;
}

/** The job's result: its own ref, so that a dependent can check that it read its parents' results. */
export interface FlowResult {
  r: string;
}

/** Sizes: `chainLength` jobs in a chain, `fanWidth` children between the fan's root and its sink. */
export interface ShapeSizes {
  chainLength: number;
  fanWidth: number;
}

/**
 * What a system's flows can express: 'dag', any job with any number of parents (nestjs-pg-queue, pg-boss);
 * 'tree', at most one dependent per job (BullMQ: a flow is a tree whose parent runs after its children, and a
 * job has one parent there). A tree has chains and fan-ins, not the fan-out of one root to many jobs, nor a
 * diamond (its top would have two dependents).
 */
export type FlowModel = 'dag' | 'tree';

/** The shapes a model can run, and how: a tree runs the fan as its fan-in alone (no root). */
export function shapeSupport(shape: FlowShape, model: FlowModel): 'full' | 'fanInOnly' | 'no' {
  if (model === 'dag') return 'full';
  return shape === 'chain' ? 'full' : shape === 'fan' ? 'fanInOnly' : 'no';
}

/**
 * The jobs of one flow of a shape, parents before children:
 * - chain: c0 <- c1 <- ... (each job depends on the previous one);
 * - fan: root, then `fanWidth` children l0.. depending on root, then sink depending on every child (for a
 *   'tree' model without the root: the children are the flow's first jobs);
 * - diamond: top, left and right (each depending on top), bottom (depending on left and right); not for 'tree'.
 */
export function shapeJobs(shape: FlowShape, sizes: ShapeSizes, model: FlowModel = 'dag'): FlowShapeJob[] {
  const support = shapeSupport(shape, model);
  if (support === 'no') throw new Error(`a ${shape} cannot be expressed by a flow model of ${model}s`);
  switch (shape) {
    case 'chain':
      return Array.from({ length: sizes.chainLength }, (_, k) => ({ ref: `c${k}`, parents: k === 0 ? [] : [`c${k - 1}`] }));
    case 'fan': {
      const root = support === 'full';
      const children = Array.from({ length: sizes.fanWidth }, (_, k) => ({ ref: `l${k}`, parents: root ? ['root'] : [] }));
      return [...(root ? [{ ref: 'root', parents: [] }] : []), ...children, { ref: 'sink', parents: children.map((c) => c.ref) }];
    }
    case 'diamond':
      return [
        { ref: 'top', parents: [] },
        { ref: 'left', parents: ['top'] },
        { ref: 'right', parents: ['top'] },
        { ref: 'bottom', parents: ['left', 'right'] },
      ];
  }
}

/** The key the host records a flow job's start and end under. */
export function flowKey(flow: number, ref: string): string {
  return `${flow}:${ref}`;
}

/** One job of one flow as every adapter enqueues it: the shape's job and the payload it carries. */
export interface FlowJobPlan extends FlowShapeJob {
  payload: FlowPayload;
}

/** Job indexes per flow: room for the largest shape (a fan of up to 9,998 children). */
const INDEX_STRIDE = 10_000;

/** Flow number `flow` of a shape, ready to enqueue: every job's payload names its flow, its ref and its parent count. */
export function flowPlan(shape: FlowShape, sizes: ShapeSizes, model: FlowModel, flow: number): FlowJobPlan[] {
  return shapeJobs(shape, sizes, model).map((job, k) => ({ ...job, payload: { i: flow * INDEX_STRIDE + k, f: flow, r: job.ref, p: job.parents.length } }));
}
