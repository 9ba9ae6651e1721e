import type { SpanContext } from '@opentelemetry/api';
import type { OtelApiModule } from './otel-api.js';
import type { TraceCarrier } from './trace-carrier.js';

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?$/;

/** The carrier of a span context, as the JSON text the insert statements bind. */
export function carrierJson(spanContext: SpanContext): string {
  const carrier: TraceCarrier = {
    traceparent: `00-${spanContext.traceId}-${spanContext.spanId}-${(spanContext.traceFlags & 0xff).toString(16).padStart(2, '0')}`,
  };
  const tracestate = spanContext.traceState?.serialize();
  if (tracestate) carrier.tracestate = tracestate;
  return JSON.stringify(carrier);
}

/**
 * The remote span context a stored carrier names, or undefined when there is none or it is malformed (a bad
 * value written by hand must not stop the job from running: its consumer span then starts a trace of its own).
 * Version ff is invalid; a later version is read by its first four fields, as the W3C spec asks.
 */
export function spanContextOf(api: OtelApiModule, stored: unknown): SpanContext | undefined {
  if (stored === null || typeof stored !== 'object') return undefined;
  const { traceparent, tracestate } = stored as Partial<Record<keyof TraceCarrier, unknown>>;
  if (typeof traceparent !== 'string') return undefined;
  const match = TRACEPARENT.exec(traceparent.trim().toLowerCase());
  if (!match || match[1] === 'ff' || (match[1] === '00' && traceparent.trim().length !== 55)) return undefined;
  const spanContext: SpanContext = { traceId: match[2], spanId: match[3], traceFlags: parseInt(match[4], 16), isRemote: true };
  if (!api.isSpanContextValid(spanContext)) return undefined;
  if (typeof tracestate === 'string' && tracestate.length > 0) spanContext.traceState = api.createTraceState(tracestate);
  return spanContext;
}
