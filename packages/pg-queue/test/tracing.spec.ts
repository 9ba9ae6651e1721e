import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { context, SpanKind, SpanStatusCode, trace, type Span, type SpanContext } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AlwaysOffSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { DataSource } from 'typeorm';
import { JobHandler, JobSnoozedError, QueueService, type Job } from 'nestjs-pg-queue';
import { useTestApp, waitFor } from './support/test-app.js';

// The app's OpenTelemetry SDK, as an app would register it before booting: spans go to memory.
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(provider);
const appTracer = trace.getTracer('the-app');

const failuresLeft = new Map<string, number>();
/** What each handler saw as its active span: its consumer span, if the handler runs inside its context. */
const activeInHandler = new Map<string, SpanContext | undefined>();

@Injectable()
class Handlers {
  @JobHandler('tr-ok')
  async ok(job: Job<{ n: number }>) {
    activeInHandler.set(job.id, trace.getActiveSpan()?.spanContext());
    // The handler's own span: a child of the attempt's consumer span.
    await appTracer.startActiveSpan('handler work', async (span) => {
      await new Promise((r) => setTimeout(r, 1));
      span.end();
    });
    return job.payload.n;
  }

  @JobHandler('tr-retry', { maxAttempts: 3, backoff: { baseMs: 5, maxMs: 5, jitter: false } })
  async flaky(job: Job) {
    const left = failuresLeft.get(job.id) ?? 1;
    if (left > 0) {
      failuresLeft.set(job.id, left - 1);
      throw new TypeError(`attempt ${job.attempt} broke`);
    }
  }

  // The claims of queues with limits (a statement of their own) return the trace context too.
  @JobHandler('tr-limited', { globalConcurrency: 2 })
  async limited() {}

  @JobHandler('tr-keyed', { concurrencyPerKey: 1 })
  async keyed() {}

  @JobHandler('tr-snooze', { maxAttempts: 1 })
  async snooze(job: Job) {
    if (!failuresLeft.has(job.id)) {
      failuresLeft.set(job.id, 0);
      throw new JobSnoozedError(5);
    }
  }
}

/** Spans exported so far whose name is `name`, oldest first. */
const spans = (name: string) => exporter.getFinishedSpans().filter((s) => s.name === name);
const attempt = (list: ReadableSpan[], id: string, n: number) =>
  list.find((s) => s.attributes['messaging.message.id'] === id && s.attributes['pg_queue.job.attempt'] === n);
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;

/** Runs `fn` inside an app span (as a request handler would), returning its result and the span. */
async function inAppSpan<T>(fn: () => Promise<T>): Promise<{ result: T; span: Span }> {
  return appTracer.startActiveSpan('POST /orders', async (span) => {
    try {
      return { result: await fn(), span };
    } finally {
      span.end();
    }
  });
}

describe('tracing: producer span at enqueue, consumer span per attempt (OpenTelemetry SDK, in-memory exporter)', () => {
  const t = useTestApp('tracing', { providers: [Handlers], queue: { maintenance: { enabled: false } } });
  const traceColumn = async (id: string) => (await t.db.query(`SELECT trace_context, status FROM background_jobs WHERE id = $1`, [id])).rows[0];
  const settled = (id: string, status = 'completed') => waitFor(`job ${id} ${status}`, async () => (await traceColumn(id))?.status === status);

  it('enqueue inside a request: a producer span under the request, its context stored; the first attempt is its child, the handler’s spans the attempt’s', async () => {
    const queue = t.app.get(QueueService);
    const { result: id, span: request } = await inAppSpan(() => queue.enqueue('tr-ok', { n: 1 }));
    await settled(id);

    const [producer] = spans('send tr-ok').filter((s) => s.attributes['messaging.message.id'] === id);
    expect(producer.kind).toBe(SpanKind.PRODUCER);
    expect(producer.spanContext().traceId).toBe(request.spanContext().traceId);
    expect(parentOf(producer)).toBe(request.spanContext().spanId);
    expect(producer.attributes).toEqual({
      'messaging.system': 'nestjs-pg-queue',
      'messaging.operation.type': 'send',
      'messaging.operation.name': 'enqueue',
      'messaging.destination.name': 'tr-ok',
      'messaging.message.id': id,
    });
    expect(producer.status.code).toBe(SpanStatusCode.UNSET);

    // What the row holds: the producer span's W3C traceparent (sampled).
    const { trace_context } = await traceColumn(id);
    expect(trace_context).toEqual({ traceparent: `00-${producer.spanContext().traceId}-${producer.spanContext().spanId}-01` });

    await waitFor('consumer span exported', async () => attempt(spans('process tr-ok'), id, 1));
    const consumer = attempt(spans('process tr-ok'), id, 1)!;
    expect(consumer.kind).toBe(SpanKind.CONSUMER);
    expect(consumer.spanContext().traceId).toBe(producer.spanContext().traceId);
    expect(parentOf(consumer)).toBe(producer.spanContext().spanId);
    expect(consumer.links).toEqual([]);
    expect(consumer.attributes).toEqual({
      'messaging.system': 'nestjs-pg-queue',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': 'tr-ok',
      'messaging.message.id': id,
      'messaging.client.id': expect.any(String),
      'pg_queue.job.attempt': 1,
      'pg_queue.job.max_attempts': 5,
    });
    expect(consumer.status.code).toBe(SpanStatusCode.UNSET);
    expect(activeInHandler.get(id)?.spanId).toBe(consumer.spanContext().spanId);
    const work = spans('handler work').find((s) => s.spanContext().traceId === consumer.spanContext().traceId)!;
    expect(parentOf(work)).toBe(consumer.spanContext().spanId);
  });

  it('an enqueue outside any span gets a root producer span, still stored and followed', async () => {
    const id = await t.app.get(QueueService).enqueue('tr-ok', { n: 2 });
    await settled(id);
    const producer = spans('send tr-ok').find((s) => s.attributes['messaging.message.id'] === id)!;
    expect(producer.parentSpanContext).toBeUndefined();
    expect((await traceColumn(id)).trace_context.traceparent).toBe(`00-${producer.spanContext().traceId}-${producer.spanContext().spanId}-01`);
    await waitFor('consumer span', async () => attempt(spans('process tr-ok'), id, 1));
    expect(parentOf(attempt(spans('process tr-ok'), id, 1)!)).toBe(producer.spanContext().spanId);
  });

  it('a retry starts a new trace linked to the producer; the failed attempt has status ERROR and the exception', async () => {
    const { result: id } = await inAppSpan(() => t.app.get(QueueService).enqueue('tr-retry', {}));
    await settled(id);
    const producer = spans('send tr-retry').find((s) => s.attributes['messaging.message.id'] === id)!;
    await waitFor('both attempts exported', async () => attempt(spans('process tr-retry'), id, 2));
    const first = attempt(spans('process tr-retry'), id, 1)!;
    const second = attempt(spans('process tr-retry'), id, 2)!;

    expect(parentOf(first)).toBe(producer.spanContext().spanId);
    expect(first.status).toEqual({ code: SpanStatusCode.ERROR, message: 'attempt 1 broke' });
    expect(first.attributes['error.type']).toBe('TypeError');
    expect(first.events.map((e) => e.name)).toEqual(['exception']);
    expect(first.events[0].attributes).toMatchObject({ 'exception.type': 'TypeError', 'exception.message': 'attempt 1 broke' });

    expect(second.parentSpanContext).toBeUndefined();
    expect(second.spanContext().traceId).not.toBe(producer.spanContext().traceId);
    expect(second.links.map((l) => l.context.spanId)).toEqual([producer.spanContext().spanId]);
    expect(second.links[0].context.traceId).toBe(producer.spanContext().traceId);
    expect(second.status.code).toBe(SpanStatusCode.UNSET);
    expect(second.attributes['pg_queue.job.attempt']).toBe(2);
  });

  it('a snooze is an event on the attempt, not an error', async () => {
    const id = await t.app.get(QueueService).enqueue('tr-snooze', {});
    await settled(id);
    await waitFor('two runs exported', async () => spans('process tr-snooze').filter((s) => s.attributes['messaging.message.id'] === id).length === 2);
    const [snoozed, rerun] = spans('process tr-snooze').filter((s) => s.attributes['messaging.message.id'] === id);
    expect(snoozed.status.code).toBe(SpanStatusCode.UNSET);
    expect(snoozed.events.map((e) => [e.name, e.attributes])).toEqual([['pg_queue.job.snoozed', { 'pg_queue.job.snooze_ms': 5 }]]);
    expect(snoozed.attributes['pg_queue.job.snooze_ms']).toBe(5);
    // A snooze does not use up the attempt: the re-run is attempt 1 again, so also a child of the producer.
    expect(rerun.attributes['pg_queue.job.attempt']).toBe(1);
    expect(parentOf(rerun)).toBe(parentOf(snoozed));
  });

  it('enqueueMany: one producer span for the batch, whose context every job carries; unique enqueues are traced too', async () => {
    const queue = t.app.get(QueueService);
    const { result: ids } = await inAppSpan(() =>
      queue.enqueueMany([
        { queue: 'tr-ok', payload: { n: 3 } },
        { queue: 'tr-ok', payload: { n: 4 }, priority: 2 },
        { queue: 'tr-ok', payload: { n: 5 } },
      ]),
    );
    const batch = spans('send tr-ok').find((s) => s.attributes['messaging.batch.message_count'] === 3)!;
    expect(batch.attributes).toMatchObject({ 'messaging.operation.name': 'enqueueMany', 'messaging.destination.name': 'tr-ok' });
    expect(batch.attributes['messaging.message.id']).toBeUndefined();
    const traceparent = `00-${batch.spanContext().traceId}-${batch.spanContext().spanId}-01`;
    const { rows } = await t.db.query(`SELECT trace_context FROM background_jobs WHERE id = ANY($1::int8[])`, [ids]);
    expect(rows.map((r) => r.trace_context)).toEqual([{ traceparent }, { traceparent }, { traceparent }]);
    for (const id of ids) await settled(id);
    await waitFor('three consumer spans', async () => ids.every((id) => attempt(spans('process tr-ok'), id, 1)));
    for (const id of ids) expect(parentOf(attempt(spans('process tr-ok'), id, 1)!)).toBe(batch.spanContext().spanId);

    // Several queues in one call: the span is named after none of them.
    await queue.enqueueMany([
      { queue: 'tr-none-a', payload: {} },
      { queue: 'tr-none-b', payload: {} },
    ]);
    expect(spans('send').at(-1)!.attributes).toMatchObject({ 'messaging.batch.message_count': 2, 'messaging.operation.name': 'enqueueMany' });
    expect(spans('send').at(-1)!.attributes['messaging.destination.name']).toBeUndefined();

    const first = await queue.enqueueUnique('tr-none-a', { v: 1 }, { uniqueKey: 'k' });
    const again = await queue.enqueueUnique('tr-none-a', { v: 2 }, { uniqueKey: 'k', onConflict: 'replace' });
    const [, replaced] = spans('send tr-none-a').filter((s) => s.attributes['messaging.operation.name'] === 'enqueueUnique');
    expect(again).toEqual({ id: first.id, duplicate: true, replaced: true });
    expect(replaced.attributes).toMatchObject({ 'messaging.message.id': first.id, 'pg_queue.job.duplicate': true });
    // The replacing call's payload is the job now, and so is its trace context.
    expect((await traceColumn(first.id)).trace_context.traceparent).toBe(`00-${replaced.spanContext().traceId}-${replaced.spanContext().spanId}-01`);
  });

  it('a flow is one trace: one producer span for enqueueFlow, every job (and the compensation it starts) a child of it', async () => {
    const queue = t.app.get(QueueService);
    const { result: flow, span: request } = await inAppSpan(() =>
      queue.enqueueFlow({
        jobs: [
          { ref: 'a', queue: 'tr-ok', payload: { n: 1 }, compensate: { queue: 'tr-ok', payload: { n: 0 } } },
          { ref: 'b', queue: 'tr-ok', payload: { n: 2 }, dependsOn: ['a'] },
          { ref: 'c', queue: 'tr-retry', payload: {}, maxAttempts: 1, dependsOn: ['b'] },
        ],
      }),
    );
    const send = spans('send').find((s) => s.attributes['messaging.operation.name'] === 'enqueueFlow')!;
    expect(send.spanContext().traceId).toBe(request.spanContext().traceId);
    expect(send.attributes['messaging.batch.message_count']).toBe(3);
    const done = await queue.waitForFlow(flow.id, { timeoutMs: 10_000 });
    // c fails its one attempt: the flow compensates a.
    expect(done.status).toBe('compensated');
    const { rows } = await t.db.query(`SELECT DISTINCT trace_context FROM background_jobs WHERE flow_id = $1`, [flow.id]);
    expect(rows).toEqual([{ trace_context: { traceparent: `00-${send.spanContext().traceId}-${send.spanContext().spanId}-01` } }]);
    await waitFor('consumer spans of a, b and the compensation', async () => spans('process tr-ok').filter((s) => s.spanContext().traceId === send.spanContext().traceId).length >= 3);
  });

  it('queues with limits (their own claim statements) carry the context to the first attempt too', async () => {
    const queue = t.app.get(QueueService);
    const { result: ids } = await inAppSpan(async () => [await queue.enqueue('tr-limited', {}), await queue.enqueue('tr-keyed', {}, { concurrencyKey: 'tenant-1' })]);
    for (const id of ids) await settled(id);
    for (const name of ['tr-limited', 'tr-keyed']) {
      const producer = spans(`send ${name}`).at(-1)!;
      const id = producer.attributes['messaging.message.id'] as string;
      await waitFor(`consumer span of ${name}`, async () => attempt(spans(`process ${name}`), id, 1));
      expect(parentOf(attempt(spans(`process ${name}`), id, 1)!)).toBe(producer.spanContext().spanId);
    }
  });

  it('inside the caller’s transaction (manager): the traced insert commits or rolls back with it', async () => {
    const dataSource = await new DataSource({ type: 'postgres', url: t.url }).initialize();
    try {
      const queue = t.app.get(QueueService);
      const { result: id } = await inAppSpan(() => dataSource.transaction((manager) => queue.enqueue('tr-ok', { n: 11 }, { manager })));
      const { result: ids } = await inAppSpan(() =>
        dataSource.transaction((manager) =>
          queue.enqueueMany(
            [
              { queue: 'tr-ok', payload: { n: 12 } },
              { queue: 'tr-ok', payload: { n: 13 }, uniqueKey: 'in-txn' },
            ],
            { manager },
          ),
        ),
      );
      const single = spans('send tr-ok').find((s) => s.attributes['messaging.message.id'] === id)!;
      const batch = spans('send tr-ok').filter((s) => s.attributes['messaging.operation.name'] === 'enqueueMany').at(-1)!;
      expect(batch.attributes['messaging.batch.message_count']).toBe(2);
      const traceparent = (s: ReadableSpan) => `00-${s.spanContext().traceId}-${s.spanContext().spanId}-01`;
      expect((await traceColumn(id)).trace_context.traceparent).toBe(traceparent(single));
      for (const job of ids) expect((await traceColumn(job)).trace_context.traceparent).toBe(traceparent(batch));
      const before = (await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'tr-none-a'`)).rows[0].n;
      await expect(
        dataSource.transaction(async (manager) => {
          await queue.enqueue('tr-none-a', {}, { manager });
          throw new Error('roll back');
        }),
      ).rejects.toThrow('roll back');
      expect((await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'tr-none-a'`)).rows[0].n).toBe(before);
    } finally {
      await dataSource.destroy();
    }
  });

  it('a failed insert ends its producer span with status ERROR; nothing is stored', async () => {
    await t.db.query(`
      CREATE FUNCTION refuse_tr_refused() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.queue_name = 'tr-refused' THEN RAISE EXCEPTION 'refused by a trigger'; END IF; RETURN NEW; END $$;
      CREATE TRIGGER refuse_tr_refused BEFORE INSERT ON background_jobs FOR EACH ROW EXECUTE FUNCTION refuse_tr_refused()`);
    try {
      await expect(t.app.get(QueueService).enqueue('tr-refused', {})).rejects.toThrow('refused by a trigger');
      const failed = spans('send tr-refused').at(-1)!;
      expect(failed.status).toEqual({ code: SpanStatusCode.ERROR, message: 'refused by a trigger' });
      expect(failed.events.map((e) => e.name)).toEqual(['exception']);
      expect((await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'tr-refused'`)).rows[0].n).toBe(0);
    } finally {
      await t.db.query(`DROP TRIGGER refuse_tr_refused ON background_jobs; DROP FUNCTION refuse_tr_refused()`);
    }
  });

  it('a raw-SQL producer’s trace_context is honoured; a malformed one is ignored and the job still runs', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const spanId = '00f067aa0ba902b7';
    const { rows } = await t.db.query(
      `INSERT INTO background_jobs (queue_name, payload, trace_context) VALUES
         ('tr-ok', '{"n": 6}', jsonb_build_object('traceparent', $1::text, 'tracestate', 'vendor=raw')),
         ('tr-ok', '{"n": 7}', '{"traceparent": "00-not-a-trace"}')
       RETURNING id`,
      [`00-${traceId}-${spanId}-01`],
    );
    const [raw, malformed] = rows.map((r) => String(r.id));
    await settled(raw);
    await settled(malformed);
    await waitFor('consumer spans', async () => attempt(spans('process tr-ok'), raw, 1) && attempt(spans('process tr-ok'), malformed, 1));
    const consumer = attempt(spans('process tr-ok'), raw, 1)!;
    expect(consumer.spanContext().traceId).toBe(traceId);
    expect(consumer.parentSpanContext).toMatchObject({ traceId, spanId, isRemote: true });
    expect(consumer.parentSpanContext?.traceState?.get('vendor')).toBe('raw');
    const orphan = attempt(spans('process tr-ok'), malformed, 1)!;
    expect(orphan.parentSpanContext).toBeUndefined();
    expect(orphan.links).toEqual([]);
  });

  it('a sampled-out enqueue still stores its context (flags 00): the attempt follows that decision and records nothing', async () => {
    trace.disable();
    trace.setGlobalTracerProvider(new BasicTracerProvider({ sampler: new ParentBasedSampler({ root: new AlwaysOffSampler() }), spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    try {
      exporter.reset();
      const id = await t.app.get(QueueService).enqueue('tr-ok', { n: 20 });
      await settled(id);
      const { trace_context } = await traceColumn(id);
      const [, traceId, , flags] = (trace_context.traceparent as string).split('-');
      expect(flags).toBe('00');
      // The handler ran inside the attempt's (non-recording) span, in the producer's trace.
      expect(activeInHandler.get(id)).toMatchObject({ traceId, traceFlags: 0 });
      expect(exporter.getFinishedSpans().filter((s) => s.instrumentationScope.name === 'nestjs-pg-queue')).toEqual([]);
    } finally {
      trace.disable();
      trace.setGlobalTracerProvider(provider);
    }
  });

  it('with no SDK registered: no column written, no span, and jobs run as before', async () => {
    trace.disable();
    try {
      exporter.reset();
      const queue = t.app.get(QueueService);
      const id = await queue.enqueue('tr-ok', { n: 8 });
      const [many] = await queue.enqueueMany([{ queue: 'tr-ok', payload: { n: 9 } }]);
      const unique = await queue.enqueueUnique('tr-ok', { n: 10 }, { uniqueKey: 'no-sdk' });
      for (const job of [id, many, unique.id]) {
        await settled(job);
        expect((await traceColumn(job)).trace_context).toBeNull();
        expect(activeInHandler.get(job)).toBeUndefined();
      }
      // (The app's own tracer, a proxy that kept the provider it found first, still exports 'handler work'.)
      expect(exporter.getFinishedSpans().filter((s) => s.instrumentationScope.name === 'nestjs-pg-queue')).toEqual([]);
    } finally {
      trace.setGlobalTracerProvider(provider);
    }
  });
});
