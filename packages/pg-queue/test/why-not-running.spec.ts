import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, JobSnoozedError, QueueService, type Job, type WaitGate } from 'nestjs-pg-queue';
import { dashboardBasicAuth } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { startDashboardApp } from './dashboard/support/dashboard-app.js';
import { buildCli, runCli } from './support/run-cli.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// "Why is this job not running?": for a job held by each gate, whyNotRunning names that gate in words, with what it
// waits for, from what the tables hold (the job's row, the queue's pause flag, the instances registry and the limits
// the serving instances registered, the running jobs, the rate window, the flow's open edges); the CLI and the job
// page of the dashboard say the same.

const gates = new Map<string, () => void>();
const hold = (id: string) => new Promise<void>((resolve) => gates.set(id, resolve));
const releaseAll = () => {
  for (const release of gates.values()) release();
  gates.clear();
};

@Injectable()
class Handlers {
  @JobHandler('why-gated')
  async gated(job: Job) {
    await hold(job.id);
  }

  @JobHandler('why-fails', { maxAttempts: 3, backoff: () => 3_600_000 })
  async fails() {
    throw new Error('the partner API said 503');
  }

  @JobHandler('why-snoozes')
  async snoozes() {
    throw new JobSnoozedError(3_600_000);
  }

  @JobHandler('why-global', { globalConcurrency: 1, prefetch: 0 })
  async global(job: Job) {
    await hold(job.id);
  }

  @JobHandler('why-keyed', { concurrencyPerKey: 1, prefetch: 0 })
  async keyed(job: Job) {
    await hold(job.id);
  }

  @JobHandler('why-rated', { rateLimit: { max: 1, intervalMs: 3_600_000 }, prefetch: 0 })
  async rated() {}
}

describe('why a job is not running', () => {
  let url: string;
  let db: pg.Pool;
  let app: INestApplicationContext;
  let queue: QueueService;

  const gatesOf = async (id: string) => (await queue.whyNotRunning(id))!.reasons.map((r) => r.gate);
  const reasonOf = async (id: string, gate: WaitGate) => (await queue.whyNotRunning(id))!.reasons.find((r) => r.gate === gate)?.reason;

  beforeAll(async () => {
    url = await createTestDatabase('why');
    db = sqlPool(url);
    app = await startApp(url, { providers: [Handlers], queue: { workerId: 'why-worker', pollIntervalMs: 100, heartbeatMs: 300, leaseMs: 3_000 } });
    queue = app.get(QueueService);
    await waitFor('registered', async () => (await queue.instances()).length === 1);
    await buildCli();
  }, 120_000);
  afterAll(async () => {
    releaseAll();
    await app?.close();
    await db?.end();
  });

  it('a job due later: scheduled, a retry after a failure, or snoozed, each with when', async () => {
    const later = await queue.enqueue('why-gated', {}, { delayMs: 3_600_000 });
    expect(await gatesOf(later)).toEqual(['scheduled']);
    expect(await reasonOf(later, 'scheduled')).toMatch(/^due at \d{4}-\d\d-\d\dT[\d:.]+Z \(in (59m \d+s|1h 0m)\)$/);

    const failed = await queue.enqueue('why-fails', {});
    await waitFor('a failed attempt', async () => (await queue.get(failed))?.attempts === 1 && (await queue.get(failed))?.status === 'queued');
    expect(await gatesOf(failed)).toEqual(['retry']);
    expect(await reasonOf(failed, 'retry')).toMatch(/^a retry after attempt 1 of 3 failed: due at /);

    const snoozed = await queue.enqueue('why-snoozes', {});
    await waitFor('snoozed', async () => (await db.query(`SELECT 1 FROM background_jobs WHERE id = $1 AND status = 'queued' AND run_at > now() + interval '30 minutes'`, [snoozed])).rowCount === 1);
    expect(await gatesOf(snoozed)).toEqual(['snoozed']);
  });

  it('running, finished, and read ahead by an instance', async () => {
    const running = await queue.enqueue('why-gated', {});
    await waitFor('running', async () => gates.has(running));
    expect((await queue.whyNotRunning(running))!.reasons).toEqual([{ gate: 'running', reason: 'it is running on instance why-worker (attempt 1 of 5)' }]);
    gates.get(running)!();
    await waitFor('completed', async () => (await queue.get(running))?.status === 'completed');
    expect(await gatesOf(running)).toEqual(['finished']);
    // A row as a worker's read-ahead claim leaves it: processing, buffered, held by that instance.
    const buffered = await queue.enqueue('why-nobody-b', {});
    await db.query(`UPDATE background_jobs SET status = 'processing', buffered = true, locked_by = 'other-instance', lease_expires_at = now() + interval '1 minute' WHERE id = $1`, [buffered]);
    const why = (await queue.whyNotRunning(buffered))!;
    expect(why.status).toBe('queued');
    expect(why.reasons[0]).toMatchObject({ gate: 'read-ahead', reason: expect.stringMatching(/^read ahead by instance other-instance and not started/) });
  });

  it('a paused queue, and a queue no live instance serves', async () => {
    const paused = await queue.enqueue('why-gated', {}, { delayMs: 3_600_000 });
    await queue.pause('why-gated');
    try {
      expect(await gatesOf(paused)).toEqual(['scheduled', 'paused']);
      expect(await reasonOf(paused, 'paused')).toBe('queue "why-gated" is paused: resume it with the Resume button on the queue\'s page of the dashboard (or its overview), `pg-queue resume why-gated`, or QueueService.resume()');
    } finally {
      await queue.resume('why-gated');
    }
    const orphan = await queue.enqueue('why-nobody', {});
    expect((await queue.whyNotRunning(orphan))!.reasons).toEqual([{ gate: 'unserved', reason: 'no live instance serves queue "why-nobody" (none has a handler for it with workers on)' }]);
  });

  it('limits: the queue at its globalConcurrency, the concurrency key busy, the rate window full', async () => {
    const first = await queue.enqueue('why-global', {});
    await waitFor('the first running', async () => gates.has(first));
    const second = await queue.enqueue('why-global', {});
    expect(await reasonOf(second, 'global-concurrency')).toBe('queue "why-global" is at its globalConcurrency: 1 of 1 running (why-worker ×1)');

    const holder = await queue.enqueue('why-keyed', {}, { concurrencyKey: 'tenant-7' });
    await waitFor('the key holder running', async () => gates.has(holder));
    const waiting = await queue.enqueue('why-keyed', {}, { concurrencyKey: 'tenant-7' });
    expect(await reasonOf(waiting, 'concurrency-key')).toBe(`its concurrency key "tenant-7" is busy: job ${holder} runs with it (concurrencyPerKey 1)`);

    const ran = await queue.enqueue('why-rated', {});
    await waitFor('the first rated job completed', async () => (await queue.get(ran))?.status === 'completed');
    const rated = await queue.enqueue('why-rated', {});
    expect(await reasonOf(rated, 'rate-limit')).toMatch(/^the rate window is full: 1 of 1 starts in 1h 0m, until \d{4}-.*Z \(in (59m \d+s|1h 0m)\)$/);
    // The holders done, the held jobs start (and hold in their turn, as their handlers do): the gates named were the ones.
    releaseAll();
    await waitFor('the held jobs started', async () => gates.has(second) && gates.has(waiting));
    releaseAll();
    await waitFor('the held jobs ran', async () => (await queue.get(waiting))?.status === 'completed' && (await queue.get(second))?.status === 'completed');
  });

  it('a job of a flow waits on its parents, named', async () => {
    const flow = await queue.enqueueFlow({ jobs: [{ ref: 'charge', queue: 'why-gated', payload: {} }, { ref: 'ship', queue: 'why-gated', payload: {}, dependsOn: ['charge'] }] });
    await waitFor('the parent running', async () => gates.has(flow.jobs.charge));
    const why = (await queue.whyNotRunning(flow.jobs.ship))!;
    expect(why).toEqual({ id: flow.jobs.ship, queue: 'why-gated', status: 'blocked', reasons: [{ gate: 'parents', reason: `waiting on its parents in its flow: job ${flow.jobs.charge} (charge), processing` }] });
    gates.get(flow.jobs.charge)!();
  });

  it('a due job that nothing holds: ready, with how many are ahead of it; the CLI and the job page say the same', async () => {
    // A live instance that serves the queue and runs nothing: the jobs wait in line.
    await db.query(`INSERT INTO background_instances (id, host, pid, queues, expires_at) VALUES ('idle', 'h', 1, '[{"queue":"why-line","concurrency":1,"running":0}]', now() + interval '1 hour')`);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await queue.enqueue('why-line', { i }));
    const high = await queue.enqueue('why-line', {}, { priority: 10 });
    expect((await queue.whyNotRunning(ids[2]))!.reasons).toEqual([{ gate: 'ready', reason: 'due, and nothing holds it: 3 due job(s) ahead of it in queue "why-line"; a worker starts it when it reaches them' }]);
    expect(await reasonOf(high, 'ready')).toMatch(/: 0 due job\(s\) ahead/);
    expect(await queue.whyNotRunning('999999999')).toBeNull();

    const cli = await runCli(['jobs', 'why', ids[2]], { DATABASE_URL: url });
    expect(cli.code).toBe(0);
    expect(cli.stdout).toBe(`job ${ids[2]} (queue why-line) is queued\n  ready              due, and nothing holds it: 3 due job(s) ahead of it in queue "why-line"; a worker starts it when it reaches them\n`);
    const json = JSON.parse((await runCli(['jobs', 'why', ids[0], '--json'], { DATABASE_URL: url })).stdout) as { reasons: { gate: string }[] };
    expect(json.reasons.map((r) => r.gate)).toEqual(['ready']);
    expect((await runCli(['jobs', 'why', '999999999'], { DATABASE_URL: url })).code).toBe(1);

    const auth = dashboardBasicAuth({ users: [{ name: 'admin', password: 'admin-password', access: 'full' }] });
    const dashboard = await startDashboardApp(url, { adapter: 'express', dashboard: { path: 'q', auth }, queue: { workers: false, maintenance: { enabled: false } }, handlers: false });
    try {
      const headers = { authorization: `Basic ${Buffer.from('admin:admin-password').toString('base64')}` };
      const page = await (await fetch(`${dashboard.baseUrl}/q/jobs/${ids[2]}`, { headers })).text();
      expect(page).toContain('<h2>Why it is not running</h2><ul class="why" data-field="why"><li data-gate="ready">due, and nothing holds it: 3 due job(s) ahead of it in queue &quot;why-line&quot;');
      const orphanPage = await (await fetch(`${dashboard.baseUrl}/q/jobs/${await queue.enqueue('why-nobody', {})}`, { headers })).text();
      expect(orphanPage).toContain('data-gate="unserved"');
    } finally {
      await dashboard.app.close();
    }
  });
});
