import type { Attributes, Span } from '@opentelemetry/api';
import type { KeyedOutcome } from '../store/unique-rows.js';
import { otelApi } from './otel-api.js';
import { ATTR, MESSAGING_SYSTEM } from './span-attributes.js';
import { recordFailure } from './record-failure.js';
import { carrierJson } from './trace-context.js';
import { queueTracer } from './tracer.js';

/** What one enqueue call is, as its producer span names it. */
export interface EnqueueCall {
  /** The QueueService method (messaging.operation.name). */
  operation: string;
  /** The queue of every job of the call, or undefined when a batch goes to several queues. */
  queue: string | undefined;
  /** Jobs in the call; a batch (enqueueMany*) says so even for one job. */
  count: number;
  batch: boolean;
}

/**
 * Runs an enqueue's insert inside a producer span (`send <queue>`, kind PRODUCER) and hands the insert the span's
 * context as the JSON of the trace_context column. One span per call: an enqueueMany of 1,000 jobs is one span
 * (messaging.batch.message_count = 1,000) whose context every job of the batch carries, so each job's first
 * attempt is a child of that span. Per-job "create" spans would cost a span per row for what a trace viewer
 * shows as one step of the producer.
 *
 * Nothing is written without `@opentelemetry/api` or without a registered SDK (two checks, no span), or when
 * the span's context is invalid, so the insert keeps its untraced statement. A sampled-out (non-recording) but
 * valid context is still written: the consumer then follows the same sampling decision.
 */
export function traceEnqueue<T>(call: EnqueueCall | (() => EnqueueCall), insert: (trace: string | undefined) => Promise<T>, describe?: (span: Span, result: T) => void): Promise<T> {
  const api = otelApi();
  if (!api) return insert(undefined);
  const tracer = queueTracer(api);
  if (!tracer) return insert(undefined);
  const { operation, queue, count, batch } = typeof call === 'function' ? call() : call;
  const attributes: Attributes = { [ATTR.system]: MESSAGING_SYSTEM, [ATTR.operationType]: 'send', [ATTR.operationName]: operation };
  if (queue !== undefined) attributes[ATTR.destination] = queue;
  if (batch) attributes[ATTR.batchCount] = count;
  const parent = api.context.active();
  const span = tracer.startSpan(queue === undefined ? 'send' : `send ${queue}`, { kind: api.SpanKind.PRODUCER, attributes }, parent);
  const spanContext = span.spanContext();
  if (!api.isSpanContextValid(spanContext)) {
    span.end();
    return insert(undefined);
  }
  // Active while the insert runs, so that a pg or TypeORM instrumentation's span of the INSERT is its child.
  return api.context.with(api.trace.setSpan(parent, span), () => insert(carrierJson(spanContext))).then(
    (result) => {
      describe?.(span, result);
      span.end();
      return result;
    },
    (error: unknown) => {
      recordFailure(api, span, error);
      span.end();
      throw error;
    },
  );
}

/** A one-job enqueue call. */
export function oneJobCall(operation: string, queue: string): EnqueueCall {
  return { operation, queue, count: 1, batch: false };
}

/** A batch call: named after its queue when every job goes to one. */
export function batchCall(operation: string, jobs: readonly { queue: string }[]): EnqueueCall {
  const queue = jobs.every((j) => j.queue === jobs[0].queue) ? jobs[0].queue : undefined;
  return { operation, queue, count: jobs.length, batch: true };
}

/** A one-job call's span learns the job's id once the insert returns it. */
export function setJobId(span: Span, id: string): void {
  span.setAttribute(ATTR.messageId, id);
}

/** A one-job call with a unique key: the id of the job that holds the key, and whether this call was a duplicate. */
export function setKeyedOutcome(span: Span, [result]: KeyedOutcome[]): void {
  span.setAttribute(ATTR.messageId, result.id);
  span.setAttribute(ATTR.duplicate, result.outcome !== 'inserted');
}
