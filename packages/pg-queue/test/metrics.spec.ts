import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type pg from 'pg';
import { Registry } from 'prom-client';
import { JobEvents, JobHandler, PgQueueModule, QueueService, type Job } from 'nestjs-pg-queue';
import { PgQueueMetrics, PgQueueMetricsModule, type PgQueueMetricsOptions } from 'nestjs-pg-queue/metrics';
import { createTestDatabase } from '@internal/pg-harness';
import { loadPromClient } from '../src/metrics/load-prom-client.js';
import { MetricsStore } from '../src/store/metrics.store.js';
import { parsePrometheusText, sampleValue, type Sample } from './support/prometheus-text.js';
import { sqlPool, waitFor } from './support/test-app.js';

@Injectable()
class Handlers {
  @JobHandler('m-ok', { concurrency: 4 })
  async ok(job: Job<{ n: number }>) {
    return job.payload.n;
  }

  @JobHandler('m-fail', { maxAttempts: 2, backoff: { baseMs: 10, maxMs: 10 } })
  async fail() {
    throw new Error('boom');
  }

  @JobHandler('m-hang')
  async hang(job: Job) {
    hanging.add(job.id);
    await new Promise<void>((resolve) => job.signal.addEventListener('abort', () => resolve()));
  }
}

const hanging = new Set<string>();

type Adapter = 'express' | 'fastify';

/** An HTTP app with PgQueueModule (maintenance off: what ran stays in the table) and PgQueueMetricsModule. */
async function startHttpApp(
  url: string,
  metrics: PgQueueMetricsOptions,
  extras: { path?: string | false; adapter?: Adapter; quiet?: boolean; leaseMs?: number } = {},
): Promise<{ app: INestApplication; base: string }> {
  @Module({
    imports: [
      PgQueueModule.forRoot({ connection: url, leaseMs: extras.leaseMs, maintenance: { enabled: false, completedRetentionMs: 86_400_000 } }),
      PgQueueMetricsModule.forRoot({ ...metrics, ...(extras.path !== undefined ? { path: extras.path } : {}) }),
    ],
    providers: [Handlers],
  })
  class MetricsAppModule {}
  let app: INestApplication;
  if (extras.adapter === 'fastify') {
    const { FastifyAdapter } = await import('@nestjs/platform-fastify');
    app = await NestFactory.create(MetricsAppModule, new FastifyAdapter() as never, { logger: ['error'], abortOnError: false });
  } else {
    app = await NestFactory.create(MetricsAppModule, { logger: extras.quiet ? false : ['error'], abortOnError: false });
  }
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  return { app, base: `http://127.0.0.1:${address.port}` };
}

async function scrape(base: string, path = '/metrics'): Promise<{ status: number; contentType: string | null; samples: Sample[]; text: string }> {
  const res = await fetch(base + path);
  const text = await res.text();
  return { status: res.status, contentType: res.headers.get('content-type'), samples: res.status === 200 ? parsePrometheusText(text) : [], text };
}

/** What the table holds, per queue and status. */
async function dbCounts(db: pg.Pool): Promise<Record<string, Record<string, number>>> {
  const { rows } = await db.query<{ queue_name: string; status: string; n: number }>(`SELECT queue_name, status::text, count(*)::int AS n FROM background_jobs GROUP BY 1, 2`);
  const out: Record<string, Record<string, number>> = {};
  for (const r of rows) (out[r.queue_name] ??= {})[r.status] = r.n;
  return out;
}

/** The oldest due queued job's age in seconds, by the database clock, per queue. */
async function dbLagSeconds(db: pg.Pool, queue: string): Promise<number> {
  const { rows } = await db.query<{ s: number }>(
    `SELECT coalesce(extract(epoch FROM now() - min(run_at)), 0)::float8 AS s FROM background_jobs WHERE queue_name = $1 AND status = 'queued' AND run_at <= now()`,
    [queue],
  );
  return rows[0].s;
}

const STATES = ['queued', 'processing', 'completed', 'failed', 'cancelled'];

describe('Prometheus metrics over HTTP (Express): the numbers equal what ran and what the table holds', () => {
  let url: string;
  let db: pg.Pool;
  let app: INestApplication;
  let base: string;

  beforeAll(async () => {
    url = await createTestDatabase('metrics');
    db = sqlPool(url);
    ({ app, base } = await startHttpApp(url, { register: new Registry(), depthCacheMs: 0 }));
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('counts started, completed, failed and dead jobs, their durations and claim latency, and the depth by state', async () => {
    const queue = app.get(QueueService);
    expect(app.get(JobEvents).observed).toBe(true);
    // One job that came due 45 s ago (by the database clock): its claim latency lands between the 30 s and 60 s
    // buckets with room on both sides (a CI pass once measured a job due 30 s ago as claimed 29.99 s later:
    // the VM's clock is not monotonic between backends).
    const [{ past }] = (await db.query<{ past: Date }>(`SELECT now() - interval '45 seconds' AS past`)).rows;
    const late = await queue.enqueue('m-ok', { n: 0 }, { runAt: past });
    const ok = await Promise.all([1, 2, 3, 4, 5].map((n) => queue.enqueue('m-ok', { n })));
    const bad = await Promise.all([1, 2].map(() => queue.enqueue('m-fail', {})));
    // A queue nobody handles here: two jobs due 2 minutes ago and one delayed, which stay queued.
    await db.query(`INSERT INTO background_jobs (queue_name, run_at, created_at) VALUES ('m-idle', now() - interval '2 minutes', now() - interval '3 minutes'), ('m-idle', now() - interval '1 minute', now() - interval '3 minutes'), ('m-idle', now() + interval '1 hour', now())`);
    await waitFor('all settled', async () => {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1) AND status IN ('completed', 'failed')`, [[late, ...ok, ...bad]]);
      return rows[0].n === 8;
    });
    // The last outcome's event follows its write: wait until this instance has counted it.
    await waitFor('counted', async () => sampleValue((await scrape(base)).samples, 'pg_queue_jobs_dead_total', { queue: 'm-fail' }) === 2);

    const lagBefore = await dbLagSeconds(db, 'm-idle');
    const { status, contentType, samples } = await scrape(base);
    const lagAfter = await dbLagSeconds(db, 'm-idle');
    expect(status).toBe(200);
    expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    const v = (name: string, labels: Record<string, string>) => sampleValue(samples, `pg_queue_${name}`, labels);

    expect(v('jobs_started_total', { queue: 'm-ok' })).toBe(6);
    expect(v('jobs_completed_total', { queue: 'm-ok' })).toBe(6);
    expect(v('jobs_failed_total', { queue: 'm-ok' })).toBe(0);
    expect(v('jobs_started_total', { queue: 'm-fail' })).toBe(4); // 2 jobs x 2 attempts
    expect(v('jobs_failed_total', { queue: 'm-fail' })).toBe(4);
    expect(v('jobs_dead_total', { queue: 'm-fail' })).toBe(2);
    expect(v('jobs_completed_total', { queue: 'm-fail' })).toBe(0);
    expect(v('lease_lost_total', { queue: 'm-ok' })).toBe(0);
    expect(v('job_duration_seconds_count', { queue: 'm-ok', outcome: 'completed' })).toBe(6);
    expect(v('job_duration_seconds_count', { queue: 'm-fail', outcome: 'failed' })).toBe(4);
    expect(v('job_duration_seconds_bucket', { queue: 'm-ok', outcome: 'completed', le: '+Inf' })).toBe(6);

    // Claim latency, by the database clock: the late job waited about 45 s, the 5 others well under 10 s.
    expect(v('claim_latency_seconds_count', { queue: 'm-ok' })).toBe(6);
    expect(v('claim_latency_seconds_bucket', { queue: 'm-ok', le: '10' })).toBe(5);
    expect(v('claim_latency_seconds_bucket', { queue: 'm-ok', le: '30' })).toBe(5);
    expect(v('claim_latency_seconds_bucket', { queue: 'm-ok', le: '60' })).toBe(6);
    expect(v('claim_latency_seconds_sum', { queue: 'm-ok' })!).toBeGreaterThanOrEqual(30);
    expect(v('claim_latency_seconds_count', { queue: 'm-fail' })).toBe(4);

    // Depth by state equals the table, for every queue in it and every state (0 included).
    const counts = await dbCounts(db);
    for (const [q, byStatus] of Object.entries(counts)) {
      for (const state of STATES) expect([q, state, v('jobs', { queue: q, state })]).toEqual([q, state, byStatus[state] ?? 0]);
    }
    expect(counts['m-idle']).toEqual({ queued: 3 });
    // The lag of m-idle is the age of its job due 2 minutes ago (the delayed one does not count).
    const lag = v('oldest_due_job_age_seconds', { queue: 'm-idle' })!;
    expect(lagBefore).toBeGreaterThanOrEqual(120);
    expect(lag).toBeGreaterThanOrEqual(lagBefore - 0.001);
    expect(lag).toBeLessThanOrEqual(lagAfter + 0.001);
    expect(v('oldest_due_job_age_seconds', { queue: 'm-ok' })).toBe(0);
    expect(v('depth_query_failures_total', {})).toBe(0);
    expect(v('depth_query_seconds', {})!).toBeGreaterThan(0);
  });

  it('counts above depthExactLimit are estimates, never below the exact count', async () => {
    const { app: small, base: smallBase } = await startHttpApp(url, { register: new Registry(), depthCacheMs: 0, depthExactLimit: 50 });
    try {
      await db.query(`INSERT INTO background_jobs (queue_name, run_at) SELECT 'm-bulk', now() + interval '1 hour' FROM generate_series(1, 400)`);
      const { samples } = await scrape(smallBase);
      // This table is far smaller than the sample, which then reads every page: the estimate is exact.
      expect(sampleValue(samples, 'pg_queue_jobs', { queue: 'm-bulk', state: 'queued' })).toBe(400);
      expect(sampleValue(samples, 'pg_queue_jobs', { queue: 'm-idle', state: 'queued' })).toBe(3);
    } finally {
      await small.close();
      await db.query(`DELETE FROM background_jobs WHERE queue_name = 'm-bulk'`);
    }
  });

  it('blocked flow jobs have a depth series of their own, apart from queued ones', async () => {
    const queue = app.get(QueueService);
    const flow = await queue.enqueueFlow({ jobs: [{ ref: 'later', queue: 'm-flow-parent', payload: {}, delayMs: 3_600_000 }, { ref: 'child', queue: 'm-flow', payload: {}, dependsOn: ['later'] }] });
    try {
      const { samples } = await scrape(base);
      expect(sampleValue(samples, 'pg_queue_jobs', { queue: 'm-flow', state: 'blocked' })).toBe(1);
      expect(sampleValue(samples, 'pg_queue_jobs', { queue: 'm-flow', state: 'queued' })).toBe(0);
    } finally {
      await queue.cancelFlow(flow.id);
    }
  });

  it('concurrent scrapes share one depth query; depthCacheMs reuses its answer', async () => {
    const spy = jest.spyOn(MetricsStore.prototype, 'depthSnapshot');
    try {
      // Five scrapes at once (all in flight before the first query answers), two depth gauges each: one query.
      const metrics = app.get(PgQueueMetrics);
      const five = await Promise.all([1, 2, 3, 4, 5].map(() => metrics.scrape()));
      for (const { body } of five) expect(sampleValue(parsePrometheusText(body), 'pg_queue_jobs', { queue: 'm-idle', state: 'queued' })).toBe(3);
      expect(spy.mock.calls.length).toBe(1);

      spy.mockClear();
      const { app: cached, base: cachedBase } = await startHttpApp(url, { register: new Registry(), depthCacheMs: 60_000 });
      try {
        for (let i = 0; i < 3; i++) await scrape(cachedBase);
        expect(spy.mock.calls.length).toBe(1);
      } finally {
        await cached.close();
      }
    } finally {
      spy.mockRestore();
    }
  });

  it('a scrape whose depth query times out still serves the counters, without depth gauges, and counts the failure', async () => {
    const { app: failing, base: failingBase } = await startHttpApp(url, { register: new Registry(), depthCacheMs: 0, depthTimeoutMs: 200 });
    const locker = await db.connect();
    try {
      // The depth query waits behind this lock until its statement_timeout (200 ms) cancels it.
      await locker.query('BEGIN; LOCK TABLE background_jobs IN ACCESS EXCLUSIVE MODE');
      const { status, samples } = await scrape(failingBase);
      await locker.query('ROLLBACK');
      expect(status).toBe(200);
      expect(samples.filter((s) => s.name === 'pg_queue_jobs' || s.name === 'pg_queue_oldest_due_job_age_seconds')).toEqual([]);
      expect(sampleValue(samples, 'pg_queue_depth_query_failures_total', {})).toBe(1);
      expect(sampleValue(samples, 'pg_queue_jobs_started_total', { queue: 'm-ok' })).toBe(0);
      // The next scrape asks again (a failure is not cached).
      const again = await scrape(failingBase);
      expect(sampleValue(again.samples, 'pg_queue_jobs', { queue: 'm-idle', state: 'queued' })).toBe(3);
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
      await failing.close();
    }
  });
});

describe('Prometheus metrics: lease losses and cancellations', () => {
  it('counts a running job taken back (its lease lost) and one cancelled while it ran', async () => {
    const url = await createTestDatabase('metrics_lease');
    const db = sqlPool(url);
    // A short lease: the heartbeat (every leaseMs / 3) finds the row no longer ours within half a second.
    const { app, base } = await startHttpApp(url, { register: new Registry(), depthCacheMs: 0 }, { leaseMs: 1_500 });
    try {
      const queue = app.get(QueueService);
      const [lost, cancelled] = [await queue.enqueue('m-hang', {}), await queue.enqueue('m-hang', {})];
      await waitFor('both running', async () => hanging.has(lost) && hanging.has(cancelled));
      // What the sweeper does to an expired lease, with run_at in an hour so that nobody claims the job again.
      await db.query(`UPDATE background_jobs SET status = 'queued', fence_token = fence_token + 1, locked_by = NULL, lease_expires_at = NULL, run_at = now() + interval '1 hour' WHERE id = $1`, [lost]);
      await queue.cancel(cancelled);
      await waitFor('counted', async () => {
        const { samples } = await scrape(base);
        return sampleValue(samples, 'pg_queue_lease_lost_total', { queue: 'm-hang' }) === 1 && sampleValue(samples, 'pg_queue_jobs_cancelled_total', { queue: 'm-hang' }) === 1;
      });
      const { samples } = await scrape(base);
      expect(sampleValue(samples, 'pg_queue_jobs_started_total', { queue: 'm-hang' })).toBe(2);
      expect(sampleValue(samples, 'pg_queue_jobs_completed_total', { queue: 'm-hang' })).toBe(0);
      expect(sampleValue(samples, 'pg_queue_jobs', { queue: 'm-hang', state: 'cancelled' })).toBe(1);
      expect(sampleValue(samples, 'pg_queue_jobs', { queue: 'm-hang', state: 'queued' })).toBe(1);
      expect((await db.query(`SELECT status FROM background_jobs WHERE id = ANY($1) ORDER BY id`, [[lost, cancelled]])).rows.map((r) => r.status)).toEqual(['queued', 'cancelled']);
    } finally {
      await app.close();
      await db.end();
    }
  });
});

describe('Prometheus metrics on Fastify', () => {
  it('serves /metrics at the configured path with the counters of a job that ran', async () => {
    const url = await createTestDatabase('metrics_fastify');
    const db = sqlPool(url);
    const { app, base } = await startHttpApp(url, { register: new Registry(), depthCacheMs: 0, prefix: 'q_' }, { adapter: 'fastify', path: '/ops/metrics' });
    try {
      const id = await app.get(QueueService).enqueue('m-ok', { n: 1 });
      await waitFor('counted', async () => sampleValue((await scrape(base, '/ops/metrics')).samples, 'q_jobs_completed_total', { queue: 'm-ok' }) === 1);
      const { contentType, samples } = await scrape(base, '/ops/metrics');
      expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(sampleValue(samples, 'q_jobs_started_total', { queue: 'm-ok' })).toBe(1);
      expect((await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0].status).toBe('completed');
      expect(sampleValue(samples, 'q_jobs', { queue: 'm-ok', state: 'completed' })).toBe(1);
      expect((await fetch(`${base}/metrics`)).status).toBe(404);
    } finally {
      await app.close();
      await db.end();
    }
  });
});

describe('PgQueueMetricsModule: boot-time checks and no cost when off', () => {
  let url: string;
  beforeAll(async () => {
    url = await createTestDatabase('metrics_boot');
  });

  it('with no exporter on, nobody listens to JobEvents (the workers build no events)', async () => {
    const { app, base } = await startHttpApp(url, { prometheus: false });
    try {
      expect(app.get(JobEvents).observed).toBe(false);
      expect((await fetch(`${base}/metrics`)).status).toBe(404);
    } finally {
      await app.close();
    }
  });

  it('fails the boot naming the option, and when a metric name is taken', async () => {
    await expect(startHttpApp(url, { prefix: '9bad' }, { quiet: true })).rejects.toThrow(/Invalid PgQueueMetricsModule option prefix="9bad"/);
    await expect(startHttpApp(url, { depthCacheMs: -1 }, { quiet: true })).rejects.toThrow(/depthCacheMs=-1/);
    await expect(startHttpApp(url, { durationBuckets: [1, 0.5] }, { quiet: true })).rejects.toThrow(/durationBuckets=\[1,0.5\]: expected a non-empty array of increasing/);
    await expect(startHttpApp(url, { colour: 'red' } as never, { quiet: true })).rejects.toThrow(/option colour="red": expected a known option/);
    const register = new Registry();
    const { Counter } = await loadPromClient();
    new Counter({ name: 'pg_queue_jobs_started_total', help: 'taken', registers: [register] });
    await expect(startHttpApp(url, { register }, { quiet: true })).rejects.toThrow(/already has a metric named "pg_queue_jobs_started_total".*prefix/);
  });

  it('a missing prom-client is named, with the command that installs it', async () => {
    const missing = () => import('prom-client-that-is-not-installed' as string);
    await expect(loadPromClient(missing)).rejects.toThrow(/needs the package "prom-client", which is not installed: run `npm install prom-client@"\^15.0.0"`/);
  });

  it('forRootAsync: options from a factory, the path next to them', async () => {
    const register = new Registry();
    @Module({
      imports: [
        PgQueueModule.forRoot({ connection: url, maintenance: { enabled: false } }),
        PgQueueMetricsModule.forRootAsync({ useFactory: async () => ({ register, prefix: 'async_' }), path: '/internal/metrics' }),
      ],
    })
    class AsyncModule {}
    const app = await NestFactory.create(AsyncModule, { logger: ['error'] });
    try {
      await app.listen(0, '127.0.0.1');
      const base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
      const { status, samples } = await scrape(base, '/internal/metrics');
      expect(status).toBe(200);
      expect(samples.map((s) => s.name)).toContain('async_depth_query_seconds');
      expect(register.getSingleMetric('async_jobs_started_total')).toBeDefined();
    } finally {
      await app.close();
    }
  });

  it('shutting the app down takes the metrics out of the registry: an app built again registers them anew', async () => {
    const register = new Registry();
    const first = await startHttpApp(url, { register });
    expect(register.getSingleMetric('pg_queue_jobs_started_total')).toBeDefined();
    await first.app.close();
    expect(register.getSingleMetric('pg_queue_jobs_started_total')).toBeUndefined();
    const second = await startHttpApp(url, { register });
    await second.app.close();
  });
});
