/**
 * What the trace_context column holds: a W3C Trace Context carrier, the same two fields an HTTP request carries
 * as headers, so a producer outside this library (raw SQL, another language) can write it with what any tracing
 * library already formats:
 *
 *     {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "vendor=value"}
 *
 * `traceparent` is required (version 00: trace id, parent span id, flags); `tracestate` is optional. Written by
 * hand rather than through the app's registered propagator: the format of a stored column must not change with
 * the app's propagation settings, and an SDK set up without a propagator would otherwise store nothing.
 */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}
