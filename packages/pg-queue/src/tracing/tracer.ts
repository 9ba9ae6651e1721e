import type { Tracer, TracerProvider } from '@opentelemetry/api';
import type { OtelApiModule } from './otel-api.js';
import { TRACER_NAME } from './span-attributes.js';

let cached: { provider: TracerProvider; tracer: Tracer } | undefined;

/**
 * The library's tracer from the tracer provider registered now. `trace.getTracer()` would hand out a new proxy
 * per call while no SDK is registered, and a proxy kept from before keeps the first provider it found; asking
 * the global proxy for its delegate costs two property reads and follows a provider registered (or replaced) later.
 */
export function queueTracer(api: OtelApiModule): Tracer {
  const global = api.trace.getTracerProvider();
  const provider = global instanceof api.ProxyTracerProvider ? global.getDelegate() : global;
  if (cached?.provider !== provider) cached = { provider, tracer: provider.getTracer(TRACER_NAME) };
  return cached.tracer;
}
