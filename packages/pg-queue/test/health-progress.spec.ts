import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { Registry } from 'prom-client';
import { JobHandler, PgQueueModule } from 'nestjs-pg-queue';
import { PgQueueHealthIndicator, PgQueueHealthModule } from 'nestjs-pg-queue/health';
import { PgQueueMetrics, PgQueueMetricsModule } from 'nestjs-pg-queue/metrics';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { LIMIT_LOCK_SPACE } from '../src/pg-queue.constants.js';
import { queueLockKey } from '../src/store/claim.store.js';
import { startDashboardApp } from './dashboard/support/dashboard-app.js';
import { parsePrometheusText, sampleValue } from './support/prometheus-text.js';
import { buildCli, runCli } from './support/run-cli.js';
import { sqlPool, waitFor } from './support/test-app.js';

// Issue 42 part 3, in one process: readiness means progress. A claim wedged behind a lock on its path (an ACCESS
// EXCLUSIVE lock on background_queues, which every claim reads for the pause flag) fails readiness once the queue has
// due jobs, idle slots and no claim answered for health.claimStalledAfterMs; the metrics say why; doctor and the
// dashboard name the instance as alive but not claiming. A blocked event loop fails readiness past
// health.maxEventLoopLagMs. Each turns back to ready when it clears. Asserted from the probe, the metrics and the
// database, never from logs.

const STALL_MS = 1_500;
const MAX_LAG_MS = 1_000;
const WORKER_ID = 'progress-one';

@Injectable()
class Handlers {
  @JobHandler('p-work', { concurrency: 2 })
  async work() {}

  // A limited queue: its claim first takes the queue's advisory lock, which the test can hold without blocking anything else.
  @JobHandler('p-limited', { globalConcurrency: 1, prefetch: 0 })
  async limited() {}
}

describe('readiness means progress', () => {
  let url: string;
  let db: pg.Pool;
  let app: INestApplication;
  let indicator: PgQueueHealthIndicator;

  const scrape = async () => parsePrometheusText((await app.get(PgQueueMetrics).scrape()).body);
  const jobStatus = async (id: string) => (await db.query<{ status: string }>(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0]?.status;
  const insertDue = async (queue: string) => (await db.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, payload) VALUES ($1, '{}') RETURNING id`, [queue])).rows[0].id;
  const doctorProgress = async () => {
    const doctor = await runCli(['doctor', '--json'], { DATABASE_URL: url });
    return (JSON.parse(doctor.stdout) as { check: string; state: string; detail: string }[]).find((c) => c.check === 'progress')!;
  };

  beforeAll(async () => {
    url = await createTestDatabase('health_progress');
    db = sqlPool(url);
    @Module({
      imports: [
        PgQueueModule.forRoot({
          connection: url,
          workerId: WORKER_ID,
          // The wedged claim holds a leases connection: enough others for heartbeats and the instance's row.
          leasePoolSize: 4,
          leaseMs: 4_000,
          heartbeatMs: 500,
          pollIntervalMs: 300,
          maintenance: { enabled: false },
          recurring: { enabled: false },
          health: { claimStalledAfterMs: STALL_MS, maxEventLoopLagMs: MAX_LAG_MS },
        }),
        PgQueueHealthModule,
        PgQueueMetricsModule.forRoot({ register: new Registry(), depthCacheMs: 0, path: false }),
      ],
      providers: [Handlers],
    })
    class ProgressApp {}
    app = await NestFactory.create(ProgressApp, { logger: false });
    await app.init();
    indicator = app.get(PgQueueHealthIndicator);
    await buildCli();
    await waitFor('ready', async () => (await indicator.isReady())['pg-queue'].status === 'up');
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('is ready, and says so in every part: database, listener, claims, event loop', async () => {
    expect(await indicator.isReady()).toEqual({ 'pg-queue': { status: 'up', database: 'up', listener: 'up', claims: 'up', eventLoop: 'up' } });
    const samples = await scrape();
    expect(sampleValue(samples, 'pg_queue_unready', { reason: 'claim-stalled', queue: 'p-work' })).toBe(0);
    expect(sampleValue(samples, 'pg_queue_unready', { reason: 'claim-stalled', queue: 'p-limited' })).toBe(0);
    expect(sampleValue(samples, 'pg_queue_unready', { reason: 'event-loop-lag', queue: '' })).toBe(0);
    expect(sampleValue(samples, 'pg_queue_unready', { reason: 'listener-down', queue: '' })).toBe(0);
    expect(sampleValue(samples, 'pg_queue_claim_idle_seconds', { queue: 'p-work' })).toBeLessThan(STALL_MS / 1000);
    expect((await doctorProgress()).state).toBe('ok');
  });

  it('a claim wedged behind a table lock on its path: not ready once due jobs wait past claimStalledAfterMs, the metrics say why; ready again once it answers', async () => {
    const locker = await db.connect();
    let id = '';
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE background_queues IN ACCESS EXCLUSIVE MODE');
      // The loop's next claim (its poll, 300 ms) waits on the lock: the database shows it.
      await waitFor('a claim waits on the lock', async () => {
        const { rows } = await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'nestjs-pg-queue leases' AND wait_event_type = 'Lock'`);
        return rows[0].n >= 1;
      });
      id = await insertDue('p-work');
      await waitFor('readiness down', async () => (await indicator.isReady())['pg-queue'].status === 'down', 20_000, 50);
      const ready = (await indicator.isReady())['pg-queue'];
      expect(ready).toMatchObject({ status: 'down', database: 'up', listener: 'up', claims: 'down', eventLoop: 'up' });
      const waited = Number(/queue "p-work" has due jobs and 2 idle slot\(s\), and no claim has answered for (\d+) ms \(claimStalledAfterMs 1500\)/.exec(String(ready.message))?.[1]);
      expect(waited).toBeGreaterThan(STALL_MS);
      expect((await indicator.checkProgress())['pg-queue-progress']).toMatchObject({ status: 'down', claims: 'down', stalled: ['p-work'] });
      // Liveness stays up: the loop waits on the database, not dead, and a restart would wait on the same lock.
      expect((await indicator.isAlive())['pg-queue'].status).toBe('up');
      // The database agrees: the job is still queued.
      expect(await jobStatus(id)).toBe('queued');
      const samples = await scrape();
      expect(sampleValue(samples, 'pg_queue_unready', { reason: 'claim-stalled', queue: 'p-work' })).toBe(1);
      expect(sampleValue(samples, 'pg_queue_unready', { reason: 'claim-stalled', queue: 'p-limited' })).toBe(0);
      expect(sampleValue(samples, 'pg_queue_claim_idle_seconds', { queue: 'p-work' })).toBeGreaterThan(STALL_MS / 1000);
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
    }
    await waitFor('the job ran', async () => (await jobStatus(id)) === 'completed', 20_000, 50);
    await waitFor('ready again', async () => (await indicator.isReady())['pg-queue'].status === 'up', 20_000, 50);
    const after = await scrape();
    expect(sampleValue(after, 'pg_queue_unready', { reason: 'claim-stalled', queue: 'p-work' })).toBe(0);
    // The loop answers again (at least once per 300 ms poll): the time since its last answer is back under the bound.
    await waitFor('claims answer again', async () => sampleValue(await scrape(), 'pg_queue_claim_idle_seconds', { queue: 'p-work' })! < STALL_MS / 1000);
  }, 60_000);

  it('a limited queue\'s claim wedged behind its advisory lock: not ready, and doctor and the dashboard name the instance as alive but not claiming; cleared once it answers', async () => {
    const locker = await db.connect();
    let id = '';
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT pg_advisory_xact_lock($1, $2)', [LIMIT_LOCK_SPACE, queueLockKey('p-limited')]);
      id = await insertDue('p-limited');
      await waitFor('readiness down', async () => (await indicator.isReady())['pg-queue'].status === 'down', 20_000, 50);
      expect((await indicator.checkProgress())['pg-queue-progress']).toMatchObject({ status: 'down', claims: 'down', stalled: ['p-limited'] });
      expect(await jobStatus(id)).toBe('queued');
      // Doctor and the dashboard read the instance's row (written every heartbeat): alive, but not claiming.
      await waitFor('the row says so', async () => {
        const { rows } = await db.query(`SELECT queues FROM background_instances WHERE id = $1 AND now() < expires_at`, [WORKER_ID]);
        return ((rows[0]?.queues as { queue: string; sinceClaimMs: number }[] | undefined)?.find((q) => q.queue === 'p-limited')?.sinceClaimMs ?? 0) > STALL_MS;
      });
      const instances = (await indicator.checkInstances())['pg-queue-instances'];
      expect(instances).toMatchObject({ status: 'down', liveInstances: 1, stalled: [{ instance: WORKER_ID, queue: 'p-limited', sinceClaimMs: expect.any(Number) }] });
      expect(instances.unserved).toBeUndefined();
      expect(instances.message).toMatch(new RegExp(`^instance ${WORKER_ID} is alive but has not claimed queue "p-limited" for \\d+ ms \\(its bound 1500 ms\\), with due jobs and idle slots$`));
      const listed = await runCli(['instances'], { DATABASE_URL: url });
      expect(listed.stdout).toMatch(new RegExp(`^not claiming: ${WORKER_ID} has not claimed p-limited for \\d+ms \\(bound 1500ms; due jobs, idle slots\\)$`, 'm'));
      const progress = await doctorProgress();
      expect(progress.state).toBe('warn');
      expect(progress.detail).toMatch(new RegExp(`^alive but not claiming: ${WORKER_ID} has not claimed p-limited for \\d+ms \\(bound 1500ms\\)$`));
      const auth = dashboardBasicAuth({ users: [{ name: 'admin', password: 'admin-password', access: 'full' }] });
      const dashboard = await startDashboardApp(url, { adapter: 'express', dashboard: { path: 'q', auth }, queue: { workers: false, maintenance: { enabled: false } }, handlers: false });
      try {
        const headers = { authorization: `Basic ${Buffer.from('admin:admin-password').toString('base64')}` };
        const page = await (await fetch(`${dashboard.baseUrl}/q/instances`, { headers })).text();
        expect(page).toMatch(new RegExp(`<p class="error" data-stalled>Alive but not claiming: <a href="#instance-${WORKER_ID}"><code>${WORKER_ID}</code></a> has not claimed <a [^>]*>p-limited</a>`));
        const overview = await (await fetch(`${dashboard.baseUrl}/q/`, { headers })).text();
        expect(overview).toContain('data-stalled="p-limited"');
        expect(overview).not.toContain('data-stalled="p-work"');
      } finally {
        await dashboard.app.close();
      }
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
    }
    await waitFor('the job ran', async () => (await jobStatus(id)) === 'completed', 20_000, 50);
    await waitFor('ready again', async () => (await indicator.isReady())['pg-queue'].status === 'up', 20_000, 50);
    await waitFor('doctor ok again', async () => (await doctorProgress()).state === 'ok', 20_000, 200);
    expect((await indicator.checkInstances())['pg-queue-instances']).toEqual({ status: 'up', liveInstances: 1 });
  }, 120_000);

  it('a queue with no due job (none, or only scheduled ones) is not stalled however long ago it claimed', async () => {
    await waitFor('no job waiting', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE status IN ('queued', 'processing')`)).rows[0].n === 0);
    const locker = await db.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE background_queues IN ACCESS EXCLUSIVE MODE');
      // No due job: the loop waits on the lock past the bound, and readiness stays up.
      await new Promise((resolve) => setTimeout(resolve, STALL_MS * 2));
            expect((await indicator.checkProgress())['pg-queue-progress']).toMatchObject({ status: 'up', claims: 'up' });
      // A scheduled job (run_at ahead) is not due either.
      await db.query(`INSERT INTO background_jobs (queue_name, payload, run_at) VALUES ('p-work', '{}', now() + interval '1 hour')`);
      expect((await indicator.checkProgress())['pg-queue-progress']).toMatchObject({ status: 'up', claims: 'up' });
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
      await db.query(`DELETE FROM background_jobs WHERE queue_name = 'p-work' AND status = 'queued'`);
    }
  }, 60_000);

  it('the LISTEN connection dead (the poll the only wake-up): not ready, the metrics say listener-down; ready again once it reconnects', async () => {
    const u = new URL(url);
    const dbName = u.pathname.slice(1);
    u.pathname = '/postgres';
    const admin = new pg.Client({ connectionString: u.toString() });
    await admin.connect();
    try {
      await admin.query(`ALTER DATABASE ${pg.escapeIdentifier(dbName)} ALLOW_CONNECTIONS false`);
      try {
        const { rows } = await admin.query(`SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'nestjs-pg-queue listener'`, [dbName]);
        expect(rows[0].n).toBe(1);
        await waitFor('readiness down', async () => (await indicator.isReady())['pg-queue'].listener === 'down', 20_000, 50);
        expect(sampleValue(await scrape(), 'pg_queue_unready', { reason: 'listener-down', queue: '' })).toBe(1);
      } finally {
        await admin.query(`ALTER DATABASE ${pg.escapeIdentifier(dbName)} ALLOW_CONNECTIONS true`);
      }
    } finally {
      await admin.end();
    }
    await waitFor('ready again', async () => (await indicator.isReady())['pg-queue'].status === 'up', 30_000, 100);
    expect(sampleValue(await scrape(), 'pg_queue_unready', { reason: 'listener-down', queue: '' })).toBe(0);
  }, 60_000);

  it('a blocked event loop: not ready past maxEventLoopLagMs (metrics say event-loop-lag), ready again once it turns freely', async () => {
    const blockMs = MAX_LAG_MS * 3;
    const until = performance.now() + blockMs;
    while (performance.now() < until) {
      // the event loop is blocked: no timer, no I/O
    }
    const ready = (await indicator.isReady())['pg-queue'];
    expect(ready).toMatchObject({ status: 'down', eventLoop: 'down' });
    const lagged = Number(/the event loop lagged (\d+) ms/.exec(String(ready.message))?.[1]);
    expect(lagged).toBeGreaterThan(MAX_LAG_MS);
    const samples = await scrape();
    expect(sampleValue(samples, 'pg_queue_unready', { reason: 'event-loop-lag', queue: '' })).toBe(1);
    expect(sampleValue(samples, 'pg_queue_event_loop_lag_seconds')).toBeGreaterThan(MAX_LAG_MS / 1000);
    // The lag is remembered for 5 s, then forgotten: ready again.
    await waitFor('ready again', async () => (await indicator.isReady())['pg-queue'].status === 'up', 30_000, 100);
    expect(sampleValue(await scrape(), 'pg_queue_unready', { reason: 'event-loop-lag', queue: '' })).toBe(0);
  }, 60_000);
});
