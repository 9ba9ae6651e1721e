import { Injectable } from '@nestjs/common';
import type { FinishedFlow } from '../flows/flow.interfaces.js';
import type { Job } from '../interfaces/job.interface.js';
import { errorLine } from '../utils/error-text.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';

/**
 * What happens to an attempt in this process's workers, in order:
 * - `active`: the handler was called;
 * - `completed`: its success was written (the row is `completed`);
 * - `failed`: a failure was written (every failed attempt), followed at once by `retrying` (the job is queued
 *   again after its backoff) or `dead` (its last attempt: the row is `failed`);
 * - `cancelled`: the job was cancelled while its handler ran (its signal is aborted, its outcome discarded);
 * - `lease-lost`: the row was taken back while the handler ran (swept after a freeze), outcome discarded;
 * - `flow-finished`: the job's outcome ended its flow (`flow`: the flow's id, name and final status). Emitted once
 *   per flow, by the process that ran its last job (a flow ended by cancelFlow or by the sweeper emits none).
 * An outcome fenced out by the database (the row was no longer this attempt's) emits no completed/failed.
 */
export type JobEventName = 'active' | 'completed' | 'failed' | 'retrying' | 'dead' | 'cancelled' | 'lease-lost' | 'flow-finished';

export const JOB_EVENT_NAMES: readonly JobEventName[] = ['active', 'completed', 'failed', 'retrying', 'dead', 'cancelled', 'lease-lost', 'flow-finished'];

/** One event of one attempt, as listeners receive it. */
export interface JobEvent<TPayload = unknown, TResult = unknown> {
  readonly name: JobEventName;
  /** The attempt, as its handler saw it. */
  readonly job: Job<TPayload>;
  /** The worker (process) that ran the attempt. */
  readonly workerId: string;
  /** Handler run time, from its call to its return or throw (0 for `active`). */
  readonly durationMs: number;
  /** `completed`: what the handler returned (undefined when nothing). */
  readonly result?: TResult;
  /** `failed`, `retrying`, `dead`: what the handler threw; `cancelled`, `lease-lost`: the abort reason. */
  readonly error?: unknown;
  /** `retrying`: ms until the next attempt may run. */
  readonly retryDelayMs?: number;
  /** `active`: claim latency, ms from the job's run_at (when it was due) to its claim, by the database clock. */
  readonly claimLatencyMs?: number;
  /** `flow-finished`: the flow the job's outcome ended. */
  readonly flow?: FinishedFlow;
}

export type JobEventListener = (event: JobEvent) => void;

/**
 * The in-process event stream of this instance's workers: @OnJobEvent methods, metrics and tracing listen
 * here. Emitting is synchronous and costs one array length check per event when nobody listens, so the hot
 * path pays nothing for listeners it does not have. A throwing (or rejecting) listener is logged with the
 * job's id and never reaches the worker.
 */
@Injectable()
export class JobEvents {
  private readonly logger = new PgQueueLogger('PgQueue');
  private listeners: { queue: string | undefined; names: ReadonlySet<JobEventName> | undefined; listener: JobEventListener }[] = [];

  /** True when someone listens: workers skip building events otherwise. */
  get observed(): boolean {
    return this.listeners.length > 0;
  }

  /**
   * Calls `listener` for the events of `queue` (every queue when undefined) whose name is in `names` (every
   * name when undefined). Returns the function that removes it.
   */
  listen(listener: JobEventListener, filter: { queue?: string; names?: readonly JobEventName[] } = {}): () => void {
    const entry = { queue: filter.queue, names: filter.names ? new Set(filter.names) : undefined, listener };
    this.listeners = [...this.listeners, entry];
    return () => {
      this.listeners = this.listeners.filter((l) => l !== entry);
    };
  }

  emit(event: JobEvent): void {
    for (const { queue, names, listener } of this.listeners) {
      if ((queue !== undefined && queue !== event.job.queue) || (names !== undefined && !names.has(event.name))) continue;
      try {
        const returned = listener(event) as unknown;
        if (typeof (returned as PromiseLike<unknown> | null)?.then === 'function') {
          (returned as Promise<unknown>).then(undefined, (error: unknown) => this.listenerFailed(event, error));
        }
      } catch (error) {
        this.listenerFailed(event, error);
      }
    }
  }

  private listenerFailed(event: JobEvent, error: unknown): void {
    this.logger.error(`a '${event.name}' listener of queue "${event.job.queue}" threw on job ${event.job.id}: ${errorLine(error)}`);
  }
}
