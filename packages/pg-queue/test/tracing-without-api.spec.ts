import { Injectable } from '@nestjs/common';
import { beforeAll, describe, expect, it } from '@jest/globals';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { loadOtelApi, otelApi, resetOtelApi } from '../src/tracing/otel-api.js';
import { useTestApp, waitFor } from './support/test-app.js';

// An app that has an SDK of its own, but where nestjs-pg-queue cannot load @opentelemetry/api (as when the
// optional peer dependency is not installed): the queue must neither trace nor break.
const exporter = new InMemorySpanExporter();
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));

const seen = new Map<string, boolean>();

@Injectable()
class Handlers {
  @JobHandler('nt-ok')
  async ok(job: Job) {
    seen.set(job.id, trace.getActiveSpan() !== undefined);
  }
}

describe('tracing when @opentelemetry/api cannot be loaded', () => {
  beforeAll(async () => {
    resetOtelApi();
    const missing = Object.assign(new Error("Cannot find package '@opentelemetry/api'"), { code: 'ERR_MODULE_NOT_FOUND' });
    expect(await loadOtelApi(() => Promise.reject(missing))).toBeUndefined();
  });
  const t = useTestApp('tracing_noapi', { providers: [Handlers], queue: { maintenance: { enabled: false } } });

  it('enqueues and runs jobs untraced: no column written, no span, the handler unwrapped', async () => {
    expect(otelApi()).toBeUndefined();
    const queue = t.app.get(QueueService);
    const ids = await trace.getTracer('app').startActiveSpan('request', async (span) => {
      try {
        return [await queue.enqueue('nt-ok', {}), ...(await queue.enqueueMany([{ queue: 'nt-ok', payload: {} }]))];
      } finally {
        span.end();
      }
    });
    await waitFor('jobs done', async () => (await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE status = 'completed'`)).rows[0].n === 2);
    const { rows } = await t.db.query(`SELECT trace_context FROM background_jobs WHERE id = ANY($1::int8[])`, [ids]);
    expect(rows).toEqual([{ trace_context: null }, { trace_context: null }]);
    expect(ids.map((id) => seen.get(id))).toEqual([false, false]);
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['request']);
  });
});
