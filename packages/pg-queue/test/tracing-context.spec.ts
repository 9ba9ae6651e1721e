import { describe, expect, it } from '@jest/globals';
import * as api from '@opentelemetry/api';
import { carrierJson, spanContextOf } from '../src/tracing/trace-context.js';

// The trace_context column's format (docs/guides/tracing.md): written by this library or by hand (raw SQL).
const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
const spanId = '00f067aa0ba902b7';

describe('trace_context carrier: W3C traceparent/tracestate as JSON', () => {
  it('writes traceparent with the flags as two hex digits, and tracestate only when there is one', () => {
    expect(JSON.parse(carrierJson({ traceId, spanId, traceFlags: api.TraceFlags.SAMPLED }))).toEqual({ traceparent: `00-${traceId}-${spanId}-01` });
    expect(JSON.parse(carrierJson({ traceId, spanId, traceFlags: api.TraceFlags.NONE, traceState: api.createTraceState('a=1,b=2') }))).toEqual({
      traceparent: `00-${traceId}-${spanId}-00`,
      tracestate: 'a=1,b=2',
    });
  });

  it('reads what it writes, as a remote parent', () => {
    const written = JSON.parse(carrierJson({ traceId, spanId, traceFlags: 1, traceState: api.createTraceState('v=x') }));
    const read = spanContextOf(api, written)!;
    expect(read).toMatchObject({ traceId, spanId, traceFlags: 1, isRemote: true });
    expect(read.traceState?.serialize()).toBe('v=x');
  });

  it('reads a hand-written value leniently (case, surrounding blanks, a later version with more fields)', () => {
    expect(spanContextOf(api, { traceparent: ` 00-${traceId.toUpperCase()}-${spanId}-01 ` })).toMatchObject({ traceId, spanId, traceFlags: 1 });
    expect(spanContextOf(api, { traceparent: `01-${traceId}-${spanId}-01-future` })).toMatchObject({ traceId, spanId });
    expect(spanContextOf(api, { traceparent: `00-${traceId}-${spanId}-01`, tracestate: '' })?.traceState).toBeUndefined();
  });

  it('ignores anything else: the job then runs with a trace of its own', () => {
    for (const stored of [
      null,
      'not an object',
      42,
      {},
      { traceparent: 7 },
      { traceparent: 'garbage' },
      { traceparent: `00-${traceId}-${spanId}` }, // no flags
      { traceparent: `00-${traceId}-${spanId}-01-extra` }, // version 00 has exactly four fields
      { traceparent: `ff-${traceId}-${spanId}-01` }, // version ff is invalid
      { traceparent: `00-${'0'.repeat(32)}-${spanId}-01` }, // all-zero trace id
      { traceparent: `00-${traceId}-${'0'.repeat(16)}-01` }, // all-zero span id
      { traceparent: `00-${traceId.slice(1)}-${spanId}-01` }, // short trace id
    ]) {
      expect(spanContextOf(api, stored)).toBeUndefined();
    }
  });
});
