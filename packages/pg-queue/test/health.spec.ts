import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, Injectable, Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import pg from 'pg';
import { JobHandler, PgQueueModule, QueueService } from 'nestjs-pg-queue';
import { PgQueueHealthIndicator, PgQueueHealthModule } from 'nestjs-pg-queue/health';
import { createTestDatabase } from '@internal/pg-harness';
import { LIMIT_LOCK_SPACE } from '../src/pg-queue.constants.js';
import { queueLockKey } from '../src/store/claim.store.js';
import { sqlPool, waitFor } from './support/test-app.js';

@Injectable()
class Handlers {
  @JobHandler('h-work')
  async work() {}

  // A limited queue: its claim first takes the queue's advisory lock, which the test can hold.
  @JobHandler('h-limited', { globalConcurrency: 1, prefetch: 0 })
  async limited() {}
}

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly queue: PgQueueHealthIndicator,
  ) {}

  @Get('live')
  @HealthCheck()
  live() {
    return this.health.check([() => this.queue.isAlive()]);
  }

  @Get('ready')
  @HealthCheck()
  ready() {
    return this.health.check([() => this.queue.isReady()]);
  }

  @Get('lag')
  @HealthCheck()
  lag() {
    return this.health.check([() => this.queue.checkLag('pg-queue-lag', { maxLagMs: 60_000 })]);
  }
}

async function get(base: string, path: string): Promise<{ status: number; body: { status: string; info?: Record<string, Record<string, unknown>>; error?: Record<string, Record<string, unknown>> } }> {
  const res = await fetch(base + path);
  return { status: res.status, body: (await res.json()) as never };
}

describe('PgQueueHealthIndicator through @nestjs/terminus', () => {
  let url: string;
  let db: pg.Pool;
  let app: INestApplication;
  let base: string;
  let dbName: string;

  beforeAll(async () => {
    url = await createTestDatabase('health');
    dbName = new URL(url).pathname.slice(1);
    db = sqlPool(url);
    @Module({
      imports: [TerminusModule, PgQueueModule.forRoot({ connection: url, maintenance: { enabled: false } }), PgQueueHealthModule],
      controllers: [HealthController],
      providers: [Handlers],
    })
    class HealthAppModule {}
    app = await NestFactory.create(HealthAppModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
    await waitFor('LISTEN up', async () => (await get(base, '/health/ready')).status === 200);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  /** A session of its own on the server's maintenance database, for ALTER DATABASE and pg_terminate_backend. */
  async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
    const u = new URL(url);
    u.pathname = '/postgres';
    const client = new pg.Client({ connectionString: u.toString() });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  }

  const terminate = (client: pg.Client, applicationName: string) =>
    client.query(`SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = $2`, [dbName, applicationName]);
  const allowConnections = (client: pg.Client, allow: boolean) => client.query(`ALTER DATABASE ${pg.escapeIdentifier(dbName)} ALLOW_CONNECTIONS ${allow}`);

  it('is up: database reachable, LISTEN up, claim loops alive, no lag', async () => {
    const ready = await get(base, '/health/ready');
    expect(ready).toEqual({ status: 200, body: expect.objectContaining({ status: 'ok', info: { 'pg-queue': { status: 'up', database: 'up', listener: 'up', claims: 'up', eventLoop: 'up' } } }) });
    const live = await get(base, '/health/live');
    expect(live.status).toBe(200);
    expect(live.body.info?.['pg-queue']).toEqual({ status: 'up', loops: 2 });
    expect((await get(base, '/health/lag')).status).toBe(200);
  });

  it('readiness is down while the LISTEN connection is gone (terminated, reconnect refused), and up again once it reconnects', async () => {
    await admin(async (client) => {
      await allowConnections(client, false);
      try {
        const { rows } = await terminate(client, 'nestjs-pg-queue listener');
        expect(rows[0].n).toBe(1);
        await waitFor('readiness down', async () => (await get(base, '/health/ready')).status === 503);
        const down = await get(base, '/health/ready');
        expect(down.body.status).toBe('error');
        expect(down.body.error?.['pg-queue']).toMatchObject({ status: 'down', listener: 'down', database: 'up', message: expect.stringMatching(/LISTEN connection is down/) });
        // Liveness does not depend on the LISTEN connection: restarting the process would not bring it back sooner.
        expect((await get(base, '/health/live')).status).toBe(200);
      } finally {
        await allowConnections(client, true);
      }
    });
    await waitFor('readiness up again', async () => (await get(base, '/health/ready')).status === 200, 20_000, 100);
    // The new LISTEN connection hears NOTIFY: a job enqueued now runs.
    const id = await app.get(QueueService).enqueue('h-work', {});
    await waitFor('job ran', async () => (await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0].status === 'completed');
  });

  it('a database outage fails readiness (database and listener down) but not liveness', async () => {
    await admin(async (client) => {
      await allowConnections(client, false);
      try {
        for (const role of ['api', 'leases', 'maintenance', 'listener']) await terminate(client, `nestjs-pg-queue ${role}`);
        await waitFor('readiness down', async () => {
          const r = await get(base, '/health/ready');
          return r.status === 503 && r.body.error?.['pg-queue']?.database === 'down' && r.body.error?.['pg-queue']?.listener === 'down';
        });
        const ready = await get(base, '/health/ready');
        expect(ready.body.error?.['pg-queue']?.message).toMatch(/database unreachable/);
        expect((await get(base, '/health/live')).status).toBe(200);
      } finally {
        await allowConnections(client, true);
      }
    });
    await waitFor('readiness up again', async () => (await get(base, '/health/ready')).status === 200, 20_000, 100);
  });

  it('lag: down when a queue’s oldest due job has waited longer than maxLagMs, naming the queue', async () => {
    await db.query(`INSERT INTO background_jobs (queue_name, run_at, created_at) VALUES ('h-idle', now() - interval '10 minutes', now() - interval '10 minutes'), ('h-later', now() + interval '1 hour', now())`);
    try {
      const down = await get(base, '/health/lag');
      expect(down.status).toBe(503);
      const result = down.body.error?.['pg-queue-lag'] as { status: string; lagMs: Record<string, number>; message: string };
      expect(result.status).toBe('down');
      expect(result.lagMs['h-idle']).toBeGreaterThanOrEqual(600_000);
      expect(result.lagMs['h-later']).toBe(0);
      expect(result.message).toMatch(/^queue "h-idle" lags \d+ ms \(max 60000\)$/);
      // A per-queue threshold checks only the queues it names.
      const indicator = app.get(PgQueueHealthIndicator);
      expect(await indicator.checkLag('lag', { maxLagMs: { 'h-later': 1 } })).toEqual({ lag: { status: 'up', lagMs: { 'h-later': 0 } } });
      expect((await indicator.checkLag('lag', { maxLagMs: { 'h-idle': 3_600_000 } })).lag.status).toBe('up');
      await expect(indicator.checkLag('lag', { maxLagMs: -5 })).rejects.toThrow(/checkLag option maxLagMs=-5: expected a number of ms/);
    } finally {
      await db.query(`DELETE FROM background_jobs WHERE queue_name IN ('h-idle', 'h-later')`);
    }
    expect((await get(base, '/health/lag')).status).toBe(200);
  });

  it('claim loops: down while a claim waits longer than stuckAfterMs, up once it returns', async () => {
    const indicator = app.get(PgQueueHealthIndicator);
    const locker = await db.connect();
    try {
      // Hold the limited queue's claim lock: its next claim waits on it.
      await locker.query('BEGIN');
      await locker.query('SELECT pg_advisory_xact_lock($1, $2)', [LIMIT_LOCK_SPACE, queueLockKey('h-limited')]);
      const id = await app.get(QueueService).enqueue('h-limited', {});
      await waitFor('claim loop stuck', async () => (await indicator.checkClaimLoops('loops', { stuckAfterMs: 300 })).loops.status === 'down');
      const stuck = await indicator.checkClaimLoops('loops', { stuckAfterMs: 300 });
      expect(stuck.loops.message).toMatch(/claim loop "h-limited" has waited \d+ ms on one claim \(stuckAfterMs 300\)/);
      await locker.query('COMMIT');
      await waitFor('job ran', async () => (await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0].status === 'completed');
      expect(await indicator.checkClaimLoops('loops', { stuckAfterMs: 300 })).toEqual({ loops: { status: 'up', loops: 2 } });
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
    }
  });
});
