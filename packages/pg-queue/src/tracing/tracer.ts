import type { ProxyTracerProvider, Tracer, TracerProvider } from '@opentelemetry/api';
import { otelApi, type OtelApiModule } from './otel-api.js';
import { TRACER_NAME } from './span-attributes.js';

let cached: { provider: TracerProvider; tracer: Tracer | undefined } | undefined;

/**
 * The library's tracer from the SDK registered now, or undefined when none is (then nothing is traced: no span,
 * no context stored, the handler called as it is). The global provider is a proxy: its delegate tells which SDK
 * is registered in two property reads, so a provider registered (or replaced) later is followed, and the no-SDK
 * case costs no no-op span per job. (`trace.getTracer()` would hand out a new proxy tracer per call while no SDK
 * is registered, and a proxy tracer kept from before keeps the first provider it found.)
 */
export function queueTracer(api: OtelApiModule): Tracer | undefined {
  const global = api.trace.getTracerProvider() as TracerProvider & Partial<Pick<ProxyTracerProvider, 'getDelegate' | 'getDelegateTracer'>>;
  if (typeof global.getDelegate !== 'function' || typeof global.getDelegateTracer !== 'function') return global.getTracer(TRACER_NAME);
  const provider = global.getDelegate();
  if (cached?.provider !== provider) cached = { provider, tracer: global.getDelegateTracer(TRACER_NAME) };
  return cached.tracer;
}

/** True while spans are made: the app has the API and a tracer provider (an SDK) is registered. Two property reads. */
export function tracingActive(): boolean {
  const api = otelApi();
  return api !== undefined && queueTracer(api) !== undefined;
}
