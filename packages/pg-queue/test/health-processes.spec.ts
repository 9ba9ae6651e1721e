import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { PgQueueModule } from 'nestjs-pg-queue';
import { PgQueueHealthIndicator, PgQueueHealthModule } from 'nestjs-pg-queue/health';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './faults/support/build-worker.js';
import { forkLoaded, startForked } from './support/serve-start.js';
import { buildCli, runCli } from './support/run-cli.js';
import { sqlPool, waitFor } from './support/test-app.js';

// Issue 42 part 3, across processes: every worker of a queue killed (SIGKILL: no clean stop, rows left to expire), then
// stopped cleanly (rows deleted: an empty registry). Either way, once due jobs wait and no live instance serves the
// queue, doctor's progress check and the deployment's health check (checkInstances) say so, within the row's expiry
// (leaseMs + heartbeatMs); a worker started again clears it. Asserted from the probes and background_instances.

const WORKER = fileURLToPath(new URL('./health/progress-worker.ts', import.meta.url));

describe('health when every worker is gone (processes)', () => {
  let url: string;
  let db: pg.Pool;
  let build: WorkerBuild;
  let monitor: INestApplicationContext;
  const children: ChildProcess[] = [];

  const start = async (workerId: string) => {
    const child = await forkLoaded(build.script);
    children.push(child);
    return startForked(child, { url, workerId });
  };
  const kill = async (child: ChildProcess, signal: NodeJS.Signals) => {
    const exited = once(child, 'exit');
    child.kill(signal);
    await exited;
  };
  const progress = async () => {
    const doctor = await runCli(['doctor', '--json'], { DATABASE_URL: url });
    return (JSON.parse(doctor.stdout) as { check: string; state: string; detail: string }[]).find((c) => c.check === 'progress')!;
  };
  const instancesCheck = async () => (await monitor.get(PgQueueHealthIndicator).checkInstances())['pg-queue-instances'];
  const insertDue = async () => (await db.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, payload) VALUES ('pk-work', '{}') RETURNING id`)).rows[0].id;
  const statusOf = async (id: string) => (await db.query<{ status: string }>(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0]?.status;
  const liveRows = async () => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_instances WHERE now() < expires_at`)).rows[0].n;

  beforeAll(async () => {
    url = await createTestDatabase('health_processes');
    db = sqlPool(url);
    build = await buildWorker([WORKER]);
    await buildCli();
    // The monitoring side: an app that serves no queue (its checkInstances reads the whole deployment).
    @Module({ imports: [PgQueueModule.forRoot({ connection: url, workers: false, maintenance: { enabled: false }, recurring: { enabled: false } }), PgQueueHealthModule] })
    class MonitorModule {}
    monitor = await NestFactory.createApplicationContext(MonitorModule, { logger: ['error'], abortOnError: false });
    await monitor.init();
  }, 180_000);
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await monitor?.close();
    await db?.end();
    await build?.remove();
  });

  it('every worker SIGKILLed: flagged once their rows expire; cleared when a worker is back', async () => {
    const workers = [await start('pk-1'), await start('pk-2')];
    await waitFor('two live rows', async () => (await liveRows()) === 2);
    const ran = await insertDue();
    await waitFor('the job ran', async () => (await statusOf(ran)) === 'completed');
    expect((await progress()).state).toBe('ok');
    expect((await instancesCheck()).status).toBe('up');

    await Promise.all(workers.map((w) => kill(w, 'SIGKILL')));
    const waiting = await insertDue();
    // The rows expire leaseMs + heartbeatMs (2.3 s) after the last write; the bound here is generous.
    await waitFor('no live row', async () => (await liveRows()) === 0, 20_000, 100);
    const flagged = await progress();
    expect(flagged.state).toBe('warn');
    // The age is formatDuration's: a whole number of seconds (an age of exactly 1000 ms) prints as "1s".
    expect(flagged.detail).toMatch(/^due jobs and no live instance serving pk-work \(oldest due \d+(?:ms|s|m) ago\)$/);
    expect(await instancesCheck()).toMatchObject({ status: 'down', liveInstances: 0, unserved: ['pk-work'] });
    expect(await statusOf(waiting)).toBe('queued');

    await start('pk-3');
    await waitFor('the waiting job ran', async () => (await statusOf(waiting)) === 'completed', 20_000, 50);
    expect((await progress()).state).toBe('ok');
    expect((await instancesCheck()).status).toBe('up');
  }, 120_000);

  it('every worker stopped cleanly (an empty registry): doctor still names the queue with due jobs', async () => {
    // The killed workers' rows, gone, are what the sweeper forgets an hour later: forget them now.
    await db.query(`DELETE FROM background_instances WHERE now() >= expires_at`);
    const live = children.filter((c) => c.exitCode === null && c.signalCode === null);
    expect(live).toHaveLength(1);
    await Promise.all(live.map((c) => kill(c, 'SIGTERM')));
    expect((await db.query(`SELECT count(*)::int AS n FROM background_instances`)).rows[0].n).toBe(0);
    const waiting = await insertDue();
    const flagged = await progress();
    expect(flagged.state).toBe('warn');
    expect(flagged.detail).toMatch(/^due jobs and no live instance serving pk-work \(oldest due \d+(?:ms|s|m) ago\); no instance has registered$/);
    expect(await statusOf(waiting)).toBe('queued');
    await start('pk-4');
    await waitFor('the job ran', async () => (await statusOf(waiting)) === 'completed', 20_000, 50);
    expect((await progress()).state).toBe('ok');
  }, 120_000);
});
