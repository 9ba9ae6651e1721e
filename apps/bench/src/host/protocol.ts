import type { FlowModel, FlowShape, ShapeSizes } from '../adapters/flow-shapes.js';
import type { BenchLimits, HandlerMode, SystemId } from '../adapters/types.js';

/** Parent -> child commands; each gets exactly one reply with the same id. */
export type Command =
  | { cmd: 'start'; system: SystemId; url: string; role: 'worker' | 'producer'; concurrency: number; poolSize: number; marks?: number[]; limits?: BenchLimits; jobMs?: number; flows?: boolean; mode?: HandlerMode }
  /** n jobs, one call at a time; with `forMs`, as many of them as fit in that time (the reply says how many). */
  | { cmd: 'enqueue-sequential'; n: number; forMs?: number }
  /** n jobs split over `callers` concurrent loops of one-at-a-time calls. */
  | { cmd: 'enqueue-concurrent'; n: number; callers: number }
  /** n jobs through the bulk API, `batch` per call, calls one after another; every call must return `batch` ids. */
  | { cmd: 'enqueue-bulk'; n: number; batch: number }
  /** The fairness scenario: `n` jobs of each key in turn (key order), through the bulk API, `batch` per call. */
  | { cmd: 'enqueue-keyed'; groups: { key: string; n: number }[]; batch: number }
  /** n jobs, one every intervalMs, each stamped with its enqueue time; resolves once all have started. */
  | { cmd: 'latency'; n: number; intervalMs: number; timeoutMs: number }
  /** The same stamped jobs from a producer, without waiting for their starts (another process records them). */
  | { cmd: 'enqueue-stamped'; n: number; intervalMs: number }
  /** On a worker: `begin` starts recording start latencies (of jobs stamped elsewhere); else waits for n of them and returns them. */
  | { cmd: 'latency-samples'; begin?: boolean; n: number; timeoutMs: number }
  /** Keeps between `wave` and 2 x `wave` jobs queued (bulk calls of `chunk`) until `total` have run. */
  | { cmd: 'feed'; total: number; wave: number; chunk: number; timeoutMs: number }
  /** Flows number `from` to `from + flows - 1` of a shape, one flow API call each, from `callers` concurrent loops. */
  | { cmd: 'enqueue-flows'; shape: FlowShape; sizes: ShapeSizes; from: number; flows: number; callers: number }
  /** What the flow handlers of flows `from`.. recorded: starts, ends, parents' results read, and job-to-dependent latencies. */
  | { cmd: 'flow-report'; shape: FlowShape; sizes: ShapeSizes; model: FlowModel; from: number; flows: number }
  | { cmd: 'stats' }
  // Memory after two full garbage collections (the child runs with --expose-gc): what the process keeps, not what it has not collected yet.
  | { cmd: 'memory' }
  | { cmd: 'stop' };

export type Envelope = Command & { id: number };

export type Reply = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };

export interface HostStats {
  handled: number;
  /** Epoch ms (sub-ms precision) of the first handler start, if any. */
  firstAt: number | null;
  /** Epoch ms at which the handler count reached each requested mark. */
  marks: Record<number, number | null>;
  rssBytes: number;
  peakRssBytes: number;
  /** V8's heap: what it holds (live objects and garbage not yet collected) and what it has reserved. */
  heapUsedBytes: number;
  heapTotalBytes: number;
}

/** memoryUsage() after two full GCs (without --expose-gc: as it is, gc false). */
export interface MemoryStats {
  gc: boolean;
  rssBytes: number;
  heapUsedBytes: number;
  heapTotalBytes: number;
  /** C++ objects bound to JS (Buffers among them), and of those the ArrayBuffers. */
  externalBytes: number;
  arrayBuffersBytes: number;
}

export interface TimedResult {
  ms: number;
  n: number;
}

export interface FeedResult extends TimedResult {
  peakRssBytes: number;
}

export interface FlowReport {
  /** Distinct flow jobs of these flows whose handler started, and starts beyond the first per job of any flow (a job run twice). */
  started: number;
  duplicateStarts: number;
  /** Parents' results the dependents should have read, and read (completed, with the parent's own result). */
  parentsExpected: number;
  parentsRead: number;
  /** Per dependent: its handler's start minus the latest end of its parents' handlers (ms), in one process's clock. */
  latencies: number[];
}

/** The steps of nestjs-pg-queue's boot the memory scenario measures the heap after (host/memory-parts.ts). */
export const MEMORY_STEPS = [
  'Node',
  '@nestjs/core and @nestjs/common loaded',
  'typeorm and pg loaded',
  'nestjs-pg-queue loaded (with what it imports beyond those)',
  'an empty Nest application context',
  'a TypeORM DataSource, initialized',
  'PgQueueModule with workers, booted',
] as const;

export interface MemoryPart {
  step: (typeof MEMORY_STEPS)[number];
  after: MemoryStats;
}
