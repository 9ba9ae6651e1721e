import type { Link, Span, SpanOptions, Tracer } from '@opentelemetry/api';
import { JobSnoozedError } from '../errors/pg-queue.error.js';
import type { Job } from '../interfaces/job.interface.js';
import { otelApi, type OtelApiModule } from './otel-api.js';
import { recordFailure } from './record-failure.js';
import { ATTR, MESSAGING_SYSTEM, SNOOZED_EVENT } from './span-attributes.js';
import { spanContextOf } from './trace-context.js';
import { queueTracer } from './tracer.js';

type Handle = (job: Job) => unknown;

/**
 * A queue's handler wrapped in a consumer span per attempt (`process <queue>`, kind CONSUMER), the handler
 * running inside the span's context so that its own spans (HTTP calls, queries) are the attempt's children.
 * - The first attempt is a child of the producer span whose context the job carries (trace_context), so one
 *   trace shows the request that enqueued the job and the job's run.
 * - A later attempt (a retry) starts a trace of its own with a link to the producer's context: a job retried
 *   over hours would otherwise make one trace that never ends.
 * - A failure sets status ERROR and records the exception; a snooze (JobSnoozedError) is not a failure: an event.
 * The span ends when the handler returns or throws (a handler that ignores its aborted signal keeps it open).
 * Without `@opentelemetry/api` the handler is returned as it is: the worker's hot path is unchanged.
 */
export function traceHandler(queue: string, workerId: string, handle: Handle): Handle {
  const api = otelApi();
  if (!api) return handle;
  const name = `process ${queue}`;
  return (job) => {
    // No SDK registered: no span, nothing to propagate; the handler runs as it is.
    const tracer = queueTracer(api);
    if (!tracer) return handle(job);
    const span = startConsumerSpan(api, tracer, name, queue, workerId, job);
    if (!api.isSpanContextValid(span.spanContext())) {
      span.end();
      return handle(job);
    }
    return runInSpan(api, span, handle, job);
  };
}

/**
 * A batch handler's calls traced as traceHandler traces attempts: one consumer span per call (`process <queue>`,
 * with messaging.batch.message_count), a root span linked to each of its jobs' producer contexts (a call's jobs come
 * from many traces, so it is the child of none). Each job's own events still carry its id.
 */
export function traceBatchHandler(queue: string, workerId: string, handle: (jobs: Job[]) => unknown): (jobs: Job[]) => unknown {
  const api = otelApi();
  if (!api) return handle;
  const name = `process ${queue}`;
  return (jobs) => {
    const tracer = queueTracer(api);
    if (!tracer) return handle(jobs);
    const links: Link[] = [];
    for (const job of jobs) {
      const stored = (job as { traceContext?: unknown }).traceContext;
      const producer = stored == null ? undefined : spanContextOf(api, stored);
      if (producer) links.push({ context: producer });
    }
    const span = tracer.startSpan(name, {
      kind: api.SpanKind.CONSUMER,
      root: true,
      links,
      attributes: {
        [ATTR.system]: MESSAGING_SYSTEM,
        [ATTR.operationType]: 'process',
        [ATTR.operationName]: 'process',
        [ATTR.destination]: queue,
        [ATTR.clientId]: workerId,
        [ATTR.batchCount]: jobs.length,
      },
    });
    if (!api.isSpanContextValid(span.spanContext())) {
      span.end();
      return handle(jobs);
    }
    return runInSpan(api, span, handle, jobs);
  };
}

/** Runs `handle(arg)` inside the span's context and ends the span when it returns, throws or settles. */
function runInSpan<A>(api: OtelApiModule, span: Span, handle: (arg: A) => unknown, arg: A): unknown {
  const context = api.trace.setSpan(api.context.active(), span);
  let result: unknown;
  try {
    result = api.context.with(context, handle, undefined, arg);
  } catch (error) {
    ended(api, span, error);
    throw error;
  }
  // A non-recording span (sampled out) has nothing to end: the handler's promise goes back as it is.
  if (!span.isRecording()) return result;
  if (typeof (result as PromiseLike<unknown> | null)?.then !== 'function') {
    span.end();
    return result;
  }
  return (result as PromiseLike<unknown>).then(
    (value) => {
      span.end();
      return value;
    },
    (error: unknown) => {
      ended(api, span, error);
      throw error;
    },
  );
}

function startConsumerSpan(api: OtelApiModule, tracer: Tracer, name: string, queue: string, workerId: string, job: Job): Span {
  const options: SpanOptions = {
    kind: api.SpanKind.CONSUMER,
    attributes: {
      [ATTR.system]: MESSAGING_SYSTEM,
      [ATTR.operationType]: 'process',
      [ATTR.operationName]: 'process',
      [ATTR.destination]: queue,
      [ATTR.messageId]: job.id,
      [ATTR.clientId]: workerId,
      [ATTR.attempt]: job.attempt,
      [ATTR.maxAttempts]: job.maxAttempts,
    },
  };
  const stored = (job as { traceContext?: unknown }).traceContext;
  const producer = stored == null ? undefined : spanContextOf(api, stored);
  if (producer && job.attempt <= 1) return tracer.startSpan(name, options, api.trace.setSpanContext(api.context.active(), producer));
  if (producer) options.links = [{ context: producer } satisfies Link];
  options.root = true;
  return tracer.startSpan(name, options);
}

function ended(api: OtelApiModule, span: Span, error: unknown): void {
  if (error instanceof JobSnoozedError) {
    span.addEvent(SNOOZED_EVENT, { [ATTR.snoozeMs]: error.delayMs });
    span.setAttribute(ATTR.snoozeMs, error.delayMs);
  } else {
    recordFailure(api, span, error);
  }
  span.end();
}
