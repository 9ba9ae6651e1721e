import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import { DataPointType, MeterProvider, MetricReader, type HistogramMetricData, type MetricData, type SumMetricData } from '@opentelemetry/sdk-metrics';
import type pg from 'pg';
import { JobEvents, JobHandler, PgQueueModule, QueueService, type Job } from 'nestjs-pg-queue';
import { PgQueueMetricsModule } from 'nestjs-pg-queue/metrics';
import { createTestDatabase } from '@internal/pg-harness';
import { DEFAULT_DURATION_BUCKETS } from '../src/metrics/resolve-metrics-options.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

@Injectable()
class Handlers {
  @JobHandler('o-ok')
  async ok(job: Job<{ n: number }>) {
    return job.payload.n;
  }

  @JobHandler('o-fail', { maxAttempts: 2, backoff: { baseMs: 10, maxMs: 10 } })
  async fail() {
    throw new Error('boom');
  }
}

/** A reader the test collects on demand (the SDK's pull path), with cumulative sums. */
class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

describe('OpenTelemetry metrics through the @opentelemetry/api meter (prometheus: false, openTelemetry: true)', () => {
  let url: string;
  let db: pg.Pool;
  let app: INestApplicationContext;
  const reader = new TestReader();

  beforeAll(async () => {
    url = await createTestDatabase('metrics_otel');
    db = sqlPool(url);
    app = await startApp(url, {
      providers: [Handlers],
      imports: [
        PgQueueModule.forRoot({ connection: url, maintenance: { enabled: false, completedRetentionMs: 86_400_000 } }),
        PgQueueMetricsModule.forRoot({ prometheus: false, openTelemetry: true }),
      ],
    });
    // Registered after the app booted, as an app that starts its SDK late would: the instruments follow it.
    metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
    metrics.disable();
  });

  async function collected(): Promise<Map<string, MetricData>> {
    const { resourceMetrics } = await reader.collect();
    const scope = resourceMetrics.scopeMetrics.find((s) => s.scope.name === 'nestjs-pg-queue');
    return new Map((scope?.metrics ?? []).map((m) => [m.descriptor.name, m]));
  }

  const sum = (data: MetricData | undefined, attributes: Record<string, string>) =>
    (data as SumMetricData | undefined)?.dataPoints.find((p) => JSON.stringify(p.attributes) === JSON.stringify(attributes))?.value;
  const histogram = (data: MetricData | undefined, attributes: Record<string, string>) =>
    (data as HistogramMetricData | undefined)?.dataPoints.find((p) => JSON.stringify(p.attributes) === JSON.stringify(attributes))?.value;

  it('records jobs started, completed, failed and dead per queue, the duration and the claim latency histograms', async () => {
    expect(app.get(JobEvents).observed).toBe(true);
    const queue = app.get(QueueService);
    const [{ past }] = (await db.query<{ past: Date }>(`SELECT now() - interval '20 seconds' AS past`)).rows;
    const ids = [
      await queue.enqueue('o-ok', { n: 0 }, { runAt: past }),
      ...(await Promise.all([1, 2].map((n) => queue.enqueue('o-ok', { n })))),
      await queue.enqueue('o-fail', {}),
    ];
    await waitFor('settled', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1) AND status IN ('completed', 'failed')`, [ids])).rows[0].n === 4);
    await waitFor('dead recorded', async () => sum((await collected()).get('pg_queue.jobs.dead'), { 'messaging.destination.name': 'o-fail' }) === 1);

    const m = await collected();
    const ok = { 'messaging.destination.name': 'o-ok' };
    const fail = { 'messaging.destination.name': 'o-fail' };
    expect(sum(m.get('pg_queue.jobs.started'), ok)).toBe(3);
    expect(sum(m.get('pg_queue.jobs.completed'), ok)).toBe(3);
    expect(sum(m.get('pg_queue.jobs.started'), fail)).toBe(2);
    expect(sum(m.get('pg_queue.jobs.failed'), fail)).toBe(2);
    expect(sum(m.get('pg_queue.jobs.completed'), fail)).toBeUndefined();
    expect(sum(m.get('pg_queue.jobs.dead'), fail)).toBe(1);

    const duration = m.get('pg_queue.job.duration')!;
    expect(duration.dataPointType).toBe(DataPointType.HISTOGRAM);
    expect(duration.descriptor.unit).toBe('s');
    expect(histogram(duration, { ...ok, 'pg_queue.job.outcome': 'completed' })?.count).toBe(3);
    expect(histogram(duration, { ...fail, 'pg_queue.job.outcome': 'failed' })?.count).toBe(2);
    expect(histogram(duration, { ...ok, 'pg_queue.job.outcome': 'completed' })?.buckets.boundaries).toEqual(DEFAULT_DURATION_BUCKETS);

    // Claim latency by the database clock: the job due 20 s before its enqueue waited at least that.
    const latency = histogram(m.get('pg_queue.job.claim_latency'), ok)!;
    expect(latency.count).toBe(3);
    // 20 s less at most a few ms: run_at came back through a JS Date (ms precision), and on a loaded CI VM two
    // backends' wall clocks (the test's now() and the claim's) were once 14 ms apart the wrong way.
    expect(latency.max).toBeGreaterThanOrEqual(19.9);
    expect(latency.min).toBeLessThan(20);
    expect(histogram(m.get('pg_queue.job.claim_latency'), fail)?.count).toBe(2);
  });
});
