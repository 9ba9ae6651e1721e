import { inspect } from 'node:util';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { Job } from '../interfaces/job.interface.js';
import { MAX_PROGRESS_BYTES } from '../pg-queue.constants.js';
import { PROGRESS_NOT_JSON, PROGRESS_TOO_LARGE } from '../pg-queue.messages.js';
import type { ClaimedJob } from '../store/job.store.js';
import { serializeValue } from '../utils/serialize-payload.js';

/**
 * The Job a handler receives, and the worker's handle on that attempt. Its AbortSignal is made on first
 * use: an AbortController with its EventTarget cost 5.4 µs and several allocations per job, 8.8% of the
 * worker's CPU at 15k no-op jobs/s, and most handlers never look at the signal. An attempt aborted before
 * anyone asked still hands out an aborted signal, with the same reason.
 */
export class JobAttempt<TPayload = unknown> implements Job<TPayload> {
  readonly id: string;
  readonly payload: TPayload;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly priority: number;
  private readonly runAtMs: number;
  private readonly createdAtMs: number;
  /** @internal The trace context the job was enqueued under (null: none), for the consumer span (tracing/). */
  readonly traceContext: unknown;
  private dates: { runAt: Date; createdAt: Date } | undefined;
  private controller: AbortController | undefined;
  private abortedWith: { reason: unknown } | undefined;
  /**
   * The last progress given and not written yet (JSON text): the next heartbeat, or the outcome, writes it
   * and clears it. Only the last value of a burst reaches the database.
   */
  progressJson: string | undefined;

  constructor(
    readonly queue: string,
    job: ClaimedJob,
  ) {
    this.id = job.id;
    this.payload = job.payload as TPayload;
    this.attempt = job.attempt;
    this.maxAttempts = job.maxAttempts;
    this.priority = job.priority;
    this.runAtMs = job.runAtMs;
    this.createdAtMs = job.createdAtMs;
    this.traceContext = job.traceContext ?? null;
  }

  get runAt(): Date {
    return this.madeDates().runAt;
  }

  get createdAt(): Date {
    return this.madeDates().createdAt;
  }

  /** Made on first use, like the signal: most handlers never read them. */
  private madeDates(): { runAt: Date; createdAt: Date } {
    return (this.dates ??= { runAt: new Date(this.runAtMs), createdAt: new Date(this.createdAtMs) });
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith.reason);
    }
    return this.controller.signal;
  }

  /**
   * What JSON.stringify(job) and console.log(job) show: the Job's fields as a plain object, since signal and
   * the dates are getters and a worker's bookkeeping (a subclass) is none of the handler's business.
   */
  toJSON(): Omit<Job<TPayload>, 'signal' | 'progress'> {
    const { id, queue, payload, attempt, maxAttempts, priority, runAt, createdAt } = this;
    return { id, queue, payload, attempt, maxAttempts, priority, runAt, createdAt };
  }

  [inspect.custom](depth: number, options: object): string {
    return `Job ${inspect(this.toJSON(), { ...options, depth: depth < 0 ? 0 : depth })}`;
  }

  progress(value: unknown): void {
    const json = serializeValue(value, 'the value', MAX_PROGRESS_BYTES);
    if (json.problem !== undefined) throw new PgQueueError(PROGRESS_NOT_JSON(this.id, json.problem));
    if (json.bytes > MAX_PROGRESS_BYTES) throw new PgQueueError(PROGRESS_TOO_LARGE(this.id, json.bytes, MAX_PROGRESS_BYTES));
    this.progressJson = json.text;
  }

  abort(reason: Error): void {
    if (this.abortedWith) return;
    this.abortedWith = { reason };
    this.controller?.abort(reason);
  }
}
