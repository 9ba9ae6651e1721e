import type { Span } from '@opentelemetry/api';
import type { OtelApiModule } from './otel-api.js';
import { ATTR } from './span-attributes.js';

/** Marks a span failed with what was thrown: an exception event, status ERROR with its message, error.type. */
export function recordFailure(api: OtelApiModule, span: Span, error: unknown): void {
  if (error instanceof Error) {
    span.recordException(error);
    span.setAttribute(ATTR.errorType, error.name || error.constructor?.name || 'Error');
    span.setStatus({ code: api.SpanStatusCode.ERROR, message: error.message });
  } else {
    span.recordException(String(error));
    span.setAttribute(ATTR.errorType, typeof error);
    span.setStatus({ code: api.SpanStatusCode.ERROR, message: String(error) });
  }
}
