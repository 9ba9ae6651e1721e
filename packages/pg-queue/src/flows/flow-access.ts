import type { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import type { FlowStore } from '../store/flow.store.js';
import { jobDefaultsOf } from '../utils/job-row.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import type { FlowJobSpec } from './flow.interfaces.js';
import { planFlow, type FlowPlan } from './plan-flow.js';

/** What a running job needs for its flow (job.parents, job.compensating, job.spawn): the store, and the planner with the module's defaults. */
export interface FlowAccess {
  readonly store: FlowStore;
  plan(method: string, jobs: readonly FlowJobSpec[]): Promise<FlowPlan>;
}

export function flowAccess(store: FlowStore, options: ResolvedModuleOptions, registry: JobHandlerRegistry): FlowAccess {
  const defaults = jobDefaultsOf(options, registry);
  return { store, plan: (method, jobs) => planFlow(method, jobs, options.maxPayloadBytes, defaults) };
}
