import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { hostname } from 'node:os';
import type pg from 'pg';
import { JobHandler, PgQueueModule, QueueService, type Job } from 'nestjs-pg-queue';
import { JobStore } from '../src/internal.js';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { PgQueueHealthIndicator, PgQueueHealthModule } from 'nestjs-pg-queue/health';
import { createTestDatabase } from '@internal/pg-harness';
import { Sweeper } from '../src/maintenance/sweeper.js';
import { startDashboardApp } from './dashboard/support/dashboard-app.js';
import { buildCli, runCli } from './support/run-cli.js';
import { sqlPool, waitFor } from './support/test-app.js';

// The instances registry: each process with workers writes its row (host, pid, queues with concurrency and what
// runs) every heartbeat and deletes it at a clean stop; a row not written within its expiry reads as gone, and the
// sweeper forgets it an hour later. The dashboard, the CLI, doctor and the health check read it; a queue with
// queued jobs and no live instance is named as one nobody runs. Asserted from background_instances.

let release: () => void = () => undefined;

@Injectable()
class SlowHandlers {
  @JobHandler('reg-slow', { concurrency: 3 })
  async slow(job: Job<{ hold?: boolean }>) {
    if (job.payload.hold) await new Promise<void>((resolve) => (release = resolve));
  }
}

@Injectable()
class OtherHandlers {
  @JobHandler('reg-other', { concurrency: 2 })
  async other() {}
}

async function startWorker(url: string, workerId: string, handlers: unknown, extra: object[] = []): Promise<INestApplicationContext> {
  @Module({
    imports: [PgQueueModule.forRoot({ connection: url, workerId, leaseMs: 3_000, heartbeatMs: 300, maintenance: { enabled: false } }), ...(extra as never[])],
    providers: [handlers as never],
  })
  class WorkerApp {}
  const app = await NestFactory.createApplicationContext(WorkerApp, { logger: ['error'], abortOnError: false });
  await app.init();
  return app;
}

/** What a row says of a queue's progress (doctor's "alive but not claiming"): idle here, claims answered. */
const progress = (idleSlots: number) => ({ sinceClaimMs: expect.any(Number), idleSlots, claimHeld: false, stalledAfterMs: 60_000 });

interface InstanceRow {
  id: string;
  host: string;
  pid: number;
  queues: { queue: string; concurrency: number; running: number }[];
  live: boolean;
}

describe('the instances registry', () => {
  let url: string;
  let db: pg.Pool;
  let first: INestApplicationContext;
  let second: INestApplicationContext | undefined;

  const rows = async () =>
    (await db.query<InstanceRow>(`SELECT id, host, pid, queues, now() < expires_at AS live FROM background_instances ORDER BY id`)).rows;

  beforeAll(async () => {
    url = await createTestDatabase('instances');
    db = sqlPool(url);
    first = await startWorker(url, 'instance-one', SlowHandlers, [PgQueueHealthModule]);
    second = await startWorker(url, 'instance-two', OtherHandlers);
    await buildCli();
  }, 120_000);
  afterAll(async () => {
    release();
    await second?.close();
    await first?.close();
    await db?.end();
  });

  it('each process with workers registers itself: host, pid, its queues with their concurrency', async () => {
    await waitFor('both rows', async () => (await rows()).length === 2);
    expect(await rows()).toEqual([
      { id: 'instance-one', host: hostname(), pid: process.pid, queues: [{ queue: 'reg-slow', concurrency: 3, running: 0, ...progress(3) }], live: true },
      { id: 'instance-two', host: hostname(), pid: process.pid, queues: [{ queue: 'reg-other', concurrency: 2, running: 0, ...progress(2) }], live: true },
    ]);
    const seen = await first.get(QueueService).instances();
    expect(seen.map((i) => i.id).sort()).toEqual(['instance-one', 'instance-two']);
    expect(seen.every((i) => i.live && i.seenMsAgo < 3_300)).toBe(true);
  });

  it('its row says what runs in it, within a heartbeat', async () => {
    const queue = first.get(QueueService);
    const id = await queue.enqueue('reg-slow', { hold: true });
    await waitFor('the job running', async () => (await queue.get(id))?.status === 'processing');
    await waitFor('running: 1 in the row', async () => (await rows()).find((r) => r.id === 'instance-one')?.queues[0].running === 1, 5_000);
    release();
    await waitFor('running: 0 again', async () => (await rows()).find((r) => r.id === 'instance-one')?.queues[0].running === 0, 5_000);
  });

  it('a queue with queued jobs and no live instance is named by the health check, doctor, the CLI and the dashboard', async () => {
    const queue = first.get(QueueService);
    await queue.enqueue('reg-nobody', { n: 1 });
    const health = first.get(PgQueueHealthIndicator);
    const check = await health.checkInstances();
    expect(check['pg-queue-instances']).toMatchObject({ status: 'down', liveInstances: 2, unserved: ['reg-nobody'] });
    expect(String(check['pg-queue-instances'].message)).toMatch(/nobody runs queue "reg-nobody"/);

    const listed = await runCli(['instances'], { DATABASE_URL: url });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/instance-one\s+\S+\s+\d+\s+reg-slow 0\/3/);
    expect(listed.stdout).toMatch(/nobody runs: reg-nobody/);
    const json = JSON.parse((await runCli(['instances', '--json'], { DATABASE_URL: url })).stdout) as { instances: InstanceRow[]; unserved: string[] };
    expect(json.unserved).toEqual(['reg-nobody']);
    expect(json.instances.map((i) => i.id).sort()).toEqual(['instance-one', 'instance-two']);
    const doctor = await runCli(['doctor', '--json'], { DATABASE_URL: url });
    const instancesCheck = (JSON.parse(doctor.stdout) as { check: string; state: string; detail: string }[]).find((c) => c.check === 'instances');
    expect(instancesCheck).toMatchObject({ state: 'warn' });
    expect(instancesCheck!.detail).toMatch(/2 live instance\(s\) run workers; nobody runs reg-nobody/);

    const auth = dashboardBasicAuth({ users: [{ name: 'admin', password: 'admin-password', access: 'full' }] });
    const dashboard = await startDashboardApp(url, { adapter: 'express', dashboard: { path: 'q', auth }, queue: { workers: false, maintenance: { enabled: false } }, handlers: false });
    try {
      const headers = { authorization: `Basic ${Buffer.from('admin:admin-password').toString('base64')}` };
      const page = await (await fetch(`${dashboard.baseUrl}/q/instances`, { headers })).text();
      expect(page).toContain('data-instance="instance-one"');
      expect(page).toMatch(/reg-slow<\/a> <span class="muted">0\/3 running/);
      expect(page).toMatch(/Nobody runs this queue: <a [^>]*>reg-nobody<\/a>/);
      const overview = await (await fetch(`${dashboard.baseUrl}/q/`, { headers })).text();
      expect(overview).toContain('data-unserved="reg-nobody"');
      expect(overview).not.toContain('data-unserved="reg-slow"');
      // A running job's lease owner links to its instance.
      const id = await first.get(QueueService).enqueue('reg-slow', { hold: true });
      await waitFor('the job running', async () => (await first.get(QueueService).get(id))?.status === 'processing');
      const jobPage = await (await fetch(`${dashboard.baseUrl}/q/jobs/${id}`, { headers })).text();
      expect(jobPage).toContain(`<a href="/q/instances#instance-instance-one">instance-one</a>`);
      release();
    } finally {
      await dashboard.app.close();
    }
    await db.query(`UPDATE background_jobs SET status = 'cancelled', finished_at = now() WHERE queue_name = 'reg-nobody'`);
    expect((await health.checkInstances())['pg-queue-instances']).toMatchObject({ status: 'up', liveInstances: 2 });
  });

  it('a clean stop deletes the row at once; a row not written within its expiry reads as gone; the sweeper forgets it an hour on', async () => {
    await second!.close();
    second = undefined;
    expect((await rows()).map((r) => r.id)).toEqual(['instance-one']);
    // A process that died: its row stops being written; by the database clock it is gone once expires_at passes.
    await db.query(`INSERT INTO background_instances (id, host, pid, queues, started_at, last_seen_at, expires_at) VALUES
      ('died-recently', 'h', 1, '[{"queue":"reg-other","concurrency":1,"running":1}]', now() - interval '1 hour', now() - interval '10 seconds', now() - interval '5 seconds'),
      ('died-long-ago', 'h', 2, '[]', now() - interval '3 hours', now() - interval '2 hours', now() - interval '2 hours')`);
    const seen = await first.get(QueueService).instances();
    expect(seen.map((i) => [i.id, i.live])).toEqual([
      ['instance-one', true],
      ['died-recently', false],
      ['died-long-ago', false],
    ]);
    expect(seen.find((i) => i.id === 'died-recently')!.seenMsAgo).toBeGreaterThanOrEqual(10_000);
    // A gone instance serves nothing.
    await first.get(QueueService).enqueue('reg-other', {});
    expect((await first.get(PgQueueHealthIndicator).checkInstances())['pg-queue-instances']).toMatchObject({ status: 'down', unserved: ['reg-other'] });
    await new Sweeper(first.get(JobStore), { log: () => undefined, warn: () => undefined, error: () => undefined }).runOnce();
    expect((await rows()).map((r) => r.id)).toEqual(['died-recently', 'instance-one']);
    await db.query(`UPDATE background_jobs SET status = 'cancelled', finished_at = now() WHERE queue_name = 'reg-other'`);
  });
});
