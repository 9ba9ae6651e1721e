import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { QueueService, compareEventIds, type QueueEvent } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './faults/support/build-worker.js';
import { forkLoaded, startForked } from './support/serve-start.js';
import { sqlPool, startApp } from './support/test-app.js';

// The event stream across processes (README: "Event stream"): one process enqueues, another runs the jobs (a fifth
// fail once and are retried), and a consumer here reads the stream while they work, stopping and resuming from its
// last id twice on the way. Asserted against the table the triggers wrote: the consumer got every event once, in
// strictly increasing ids, and each job's events match its row (attempts, final status).
describe('the event stream across processes', () => {
  const JOBS = 200;
  let build: WorkerBuild;
  const children: ChildProcess[] = [];
  let consumer: INestApplicationContext;
  let db: pg.Pool;
  let url: string;

  const spawn = async (env: Record<string, string>): Promise<ChildProcess> => {
    const child = await forkLoaded(build.script, env);
    children.push(child);
    return startForked(child, { url });
  };

  beforeAll(async () => {
    url = await createTestDatabase('event-stream-processes');
    consumer = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    db = sqlPool(url);
    build = await buildWorker([fileURLToPath(new URL('./events/event-process.ts', import.meta.url))]);
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? once(c, 'exit') : undefined)));
    await consumer?.close();
    await db?.end();
    await build?.remove();
  });

  it('a consumer that stops and resumes gets every event of an enqueuing and a working process once, in order', async () => {
    const queue = consumer.get(QueueService);
    await queue.recordEvents('evp-work');
    await spawn({ ROLE: 'worker' });
    const producing = spawn({ ROLE: 'producer', JOBS: String(JOBS) });

    const seen: QueueEvent[] = [];
    const done = () => seen.filter((e) => e.type === 'completed').length === JOBS;
    let after: string | undefined = '0-0';
    // Three consumer lives: each stops after its share (a restart), the next resumes after the last id it saw.
    for (const stopAt of [JOBS * 0.8, JOBS * 2.5, Infinity]) {
      const stop = new AbortController();
      const timer = setTimeout(() => stop.abort(), 60_000);
      for await (const event of queue.events({ after, queues: ['evp-work'], pageSize: 25, pollIntervalMs: 100, signal: stop.signal })) {
        seen.push(event);
        if (seen.length >= stopAt || done()) break;
      }
      clearTimeout(timer);
      after = seen.at(-1)?.id ?? after;
      if (done()) break;
    }
    await producing;
    expect(done()).toBe(true);

    for (let i = 1; i < seen.length; i++) expect(compareEventIds(seen[i - 1].id, seen[i].id)).toBeLessThan(0);
    const recorded = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_job_events WHERE queue_name = 'evp-work'`)).rows[0].n;
    expect(seen).toHaveLength(recorded);
    expect(new Set(seen.map((e) => e.id)).size).toBe(recorded);
    const rows = (await db.query<{ id: string; n: number; attempts: number; status: string }>(
      `SELECT id::text, (payload ->> 'n')::int AS n, attempts, status::text FROM background_jobs WHERE queue_name = 'evp-work'`,
    )).rows;
    expect(rows).toHaveLength(JOBS);
    for (const row of rows) {
      const types = seen.filter((e) => e.jobId === row.id).map((e) => e.type);
      expect(row.status).toBe('completed');
      expect(types).toEqual(row.n % 5 === 0 ? ['enqueued', 'started', 'failed', 'retrying', 'started', 'completed'] : ['enqueued', 'started', 'completed']);
      expect(types.filter((t) => t === 'started')).toHaveLength(row.attempts);
    }
  }, 120_000);
});
