import type * as OtelApi from '@opentelemetry/api';

/**
 * `@opentelemetry/api`, when the app has it: an optional peer dependency, so it is imported lazily and an app
 * without it runs unchanged (tracing stays off, nothing is wrapped). The import starts when this file is first
 * loaded and the module awaits it while booting (PgQueueModule's OTEL_API provider), so by the time a worker
 * starts or an enqueue runs, the answer is known. The API keeps its state on a global, so this copy and the
 * app's (and its SDK's) see the same registered tracer provider and context manager.
 */
export type OtelApiModule = typeof OtelApi;

/** The Nest provider token that makes the boot wait for the import. */
export const OTEL_API = Symbol('pg-queue:otel_api');

let api: OtelApiModule | undefined;
let loading: Promise<OtelApiModule | undefined> | undefined;

/** Resolves with the API, or undefined when the app does not have `@opentelemetry/api` (never rejects). */
export function loadOtelApi(load: () => Promise<OtelApiModule> = () => import('@opentelemetry/api')): Promise<OtelApiModule | undefined> {
  loading ??= load().then(
    (module) => (api = module),
    () => undefined,
  );
  return loading;
}

/** The API if it is loaded; undefined while it loads, or for good when the app does not have it. */
export function otelApi(): OtelApiModule | undefined {
  return api;
}

/** @internal Tests: forget the loaded API, as if the app did not have it (`load` then decides again). */
export function resetOtelApi(): void {
  api = undefined;
  loading = undefined;
}

void loadOtelApi();
