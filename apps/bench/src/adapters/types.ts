/**
 * What every queue under test looks like to the benchmark: start it (as a worker or as an enqueue-only
 * producer), enqueue one job or many through its own public API, stop it. Nothing else: the scenarios
 * must not reach into a library's internals, or the comparison stops being about the libraries.
 */

/** The contenders, in the order the table shows them (the plain SQL loop, the reference, last). */
export const SYSTEM_IDS = ['pg-queue', 'pg-boss', 'graphile-worker', 'bullmq', 'plain-sql'] as const;
/**
 * `pg-queue-base` is nestjs-pg-queue as built in another checkout (`--baseline <dir>`): the same adapter run
 * from that tree, so a change is measured before and after in one run, on one machine state.
 */
export const BASELINE_ID = 'pg-queue-base';
/**
 * `pg-queue-defaults` is nestjs-pg-queue configured as a bare `@JobHandler('bench')` leaves it (concurrency
 * only: no prefetch, no batch size), next to the tuned settings of `pg-queue`. It runs only in the scenarios
 * that compare the two (defaults, spread).
 */
export const DEFAULTS_ID = 'pg-queue-defaults';
export type SystemId = (typeof SYSTEM_IDS)[number] | typeof BASELINE_ID | typeof DEFAULTS_ID;

import type { BenchPayload } from './bench-payload.js';
import type { FlowPayload, FlowShape, ShapeSizes } from './flow-shapes.js';

export type { BenchPayload } from './bench-payload.js';

export interface AdapterOptions {
  url: string;
  /** 'worker' processes jobs; 'producer' only enqueues (an API server, a script). */
  role: 'worker' | 'producer';
  /** Jobs running at once in this process. */
  concurrency: number;
  /** Connections in the system's own pool (enqueue with 16 callers needs 16). */
  poolSize: number;
  /** Called at the start of every handler call, before anything else. */
  onJob: (payload: BenchPayload) => void;
  /** Milliseconds each handler call takes (a sleep after it is counted); 0 or absent: a no-op handler. */
  jobMs?: number;
  /** nestjs-pg-queue only: configure the queue with its concurrency alone, as a bare `@JobHandler` gets it. */
  librarySettings?: 'tuned' | 'defaults';
  /** The limits scenario (systems with SystemInfo.limits): limits across instances, and jobs spread over `keys` concurrency keys. */
  limits?: BenchLimits;
  /**
   * The flows scenario (systems with SystemInfo.flows): the handler runs flow jobs (FlowPayload): it reads its
   * parents' results through the library's own API, calls this with how many it read (right before it returns),
   * and returns { r: its ref } as its result. A worker started without it runs no flow code at all.
   */
  onFlowJobEnd?: (payload: FlowPayload, parentsRead: number) => void;
  /** The modes scenario: how the handler takes its jobs (see HandlerMode). */
  mode?: HandlerMode;
}

/**
 * The modes scenario's handler shapes: `batch` jobs per handler call (a batch handler, for the systems that have
 * one); `steps` durable steps per job (no-op functions returning a number); `transactional` (the handler runs in a
 * transaction of the app's DataSource, which writes the completion). nestjs-pg-queue has all three; pg-boss batches.
 */
export interface HandlerMode {
  batch?: number;
  steps?: number;
  transactional?: boolean;
}

export interface BenchLimits {
  globalConcurrency?: number;
  concurrencyPerKey?: number;
  /** Enqueue job i with concurrencyKey `k${i % keys}`. */
  keys?: number;
  /** The fairness scenario: fair share across the jobs' keys (the payload's `k`, enqueued as concurrencyKey). */
  fairness?: true | { weights: Record<string, number> };
  /** The fairness scenario's references: the queue's read-ahead set explicitly (0: none); absent, the library's default. */
  prefetch?: number;
}

export interface RunningSystem {
  /** One job, one call of the library's single-job API, awaited. */
  enqueue(payload: BenchPayload): Promise<void>;
  /** Many jobs in one call of the library's bulk API (one statement for each system), asking for their ids; resolves to how many ids came back. */
  enqueueMany(payloads: BenchPayload[]): Promise<number>;
  /**
   * Flow number `flow` of a shape, in one call of the library's flow API (systems with flows only; a tree-model
   * system gets only the shapes a tree can express, as flow-shapes.ts plans them).
   */
  enqueueFlow?(shape: FlowShape, sizes: ShapeSizes, flow: number): Promise<void>;
  /** Graceful stop: running handlers finish, connections close. */
  stop(): Promise<void>;
}

export interface Adapter {
  start(options: AdapterOptions): Promise<RunningSystem>;
}

/** The queue name every system uses; one queue, one handler. */
export const QUEUE = 'bench';

/** A handler's simulated work, awaited after the job was counted (nothing at all for no-op jobs). */
export function work(jobMs: number | undefined): Promise<void> | undefined {
  return jobMs ? new Promise((resolve) => setTimeout(resolve, jobMs)) : undefined;
}
