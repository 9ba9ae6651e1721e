import { inspect } from 'node:util';
import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, statusCounts, useTestApp, waitFor } from './support/test-app.js';

const seen: { id: string; attempt: number; payload: unknown }[] = [];
const shown: { json: unknown; inspected: string }[] = [];

@Injectable()
class Handlers {
  @JobHandler('echo', { concurrency: 4 })
  async echo(job: Job<{ n: number }>) {
    seen.push({ id: job.id, attempt: job.attempt, payload: job.payload });
    shown.push({ json: JSON.parse(JSON.stringify(job)), inspected: inspect(job) });
  }
}

const t = useTestApp('lifecycle', { providers: [Handlers] });

describe('core lifecycle', () => {
  it('enqueues, claims, runs and completes a job', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('echo', { n: 1 });
    await waitFor('completion', async () => (await queue.get(id))?.status === 'completed');
    const record = await queue.get(id);
    expect(record).toMatchObject({ queue: 'echo', payload: { n: 1 }, attempts: 1, status: 'completed', lastError: null });
    expect(record!.finishedAt).toBeInstanceOf(Date);
    expect(seen).toContainEqual({ id, attempt: 1, payload: { n: 1 } });
    expect(await statusCounts(t.db, 'echo')).toEqual({ completed: 1 });
    // Logging a job shows its fields, dates included, and none of the worker's bookkeeping.
    const { json, inspected } = shown[seen.findIndex((s) => s.id === id)];
    expect(json).toEqual({ id, queue: 'echo', payload: { n: 1 }, attempt: 1, maxAttempts: 5, priority: 0, runAt: record!.runAt.toISOString(), createdAt: record!.createdAt.toISOString() });
    expect(inspected).toContain(`id: '${id}'`);
    expect(inspected).not.toMatch(/worker|settled|timer/);
  });

  // The claim sends created_at only when it differs from run_at (CREATED_AT_MS in job.sql.ts): a delayed job shows both.
  it('a delayed job shows its handler the row\'s created_at and run_at, which differ', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('echo', { n: 9 }, { delayMs: 300 });
    await waitFor('completion', async () => (await queue.get(id))?.status === 'completed');
    const row = (await t.db.query(`SELECT to_json(created_at) #>> '{}' AS created, to_json(run_at) #>> '{}' AS run FROM background_jobs_all WHERE id = $1`, [id])).rows[0];
    const json = shown[seen.findIndex((s) => s.id === id)].json as { createdAt: string; runAt: string };
    expect(new Date(json.createdAt).getTime()).toBe(Math.floor(Date.parse(row.created)));
    expect(new Date(json.runAt).getTime()).toBe(Math.floor(Date.parse(row.run)));
    expect(new Date(json.runAt).getTime() - new Date(json.createdAt).getTime()).toBeGreaterThanOrEqual(299);
  });

  it('pause stops every instance from claiming; resume wakes the workers at once', async () => {
    const queue = t.app.get(QueueService);
    await queue.pause('echo');
    expect(await queue.pausedQueues()).toEqual(['echo']);
    const id = await queue.enqueue('echo', { n: 2 });
    await new Promise((r) => setTimeout(r, 400));
    expect((await queue.get(id))!.status).toBe('queued');
    const t0 = Date.now();
    await queue.resume('echo');
    await waitFor('completion after resume', async () => (await queue.get(id))?.status === 'completed');
    expect(Date.now() - t0).toBeLessThan(2_000); // NOTIFY, not the 30 s poll
    expect(await queue.pausedQueues()).toEqual([]);
  });

  it('deletes completed jobs at once with completedRetentionMs: 0', async () => {
    const url0 = await createTestDatabase('retention0');
    const app0 = await startApp(url0, { providers: [Handlers], queue: { maintenance: { completedRetentionMs: 0 } } });
    const db0 = sqlPool(url0);
    const queue = app0.get(QueueService);
    const ids = await queue.enqueueMany([{ queue: 'echo', payload: { n: 3 } }, { queue: 'echo', payload: { n: 4 } }]);
    await waitFor('both ran', async () => ids.every((id) => seen.some((s) => s.id === id)));
    await waitFor('rows deleted', async () => (await db0.query('SELECT count(*)::int AS n FROM background_jobs')).rows[0].n === 0);
    await app0.close();
    await db0.end();
  });

  it('enqueueMany keeps input order and each job’s options, in a uniform batch and a mixed one', async () => {
    // Queues without a handler: the rows stay as enqueued. A uniform batch goes through the scalar statement,
    // a mixed one through the per-row arrays; both must return ids in input order.
    const queue = t.app.get(QueueService);
    const later = new Date(Date.now() + 3_600_000);
    const uniform = await queue.enqueueMany(Array.from({ length: 40 }, (_, i) => ({ queue: 'idle-a', payload: { i }, priority: 3, maxAttempts: 7, delayMs: 60_000 })));
    const mixed = await queue.enqueueMany(
      Array.from({ length: 40 }, (_, i) => ({ queue: i % 2 ? 'idle-a' : 'idle-b', payload: { i }, priority: i % 3, ...(i % 5 === 0 ? { runAt: later } : {}) })),
    );
    const read = async (ids: string[]) => {
      const { rows } = await t.db.query(
        `SELECT id::text, queue_name, payload, priority, max_attempts, run_at > now() + interval '30 seconds' AS delayed
         FROM background_jobs WHERE id = ANY($1::int8[])`,
        [ids],
      );
      const byId = new Map(rows.map((r) => [r.id as string, r]));
      return ids.map((id) => byId.get(id));
    };
    expect(await read(uniform)).toEqual(uniform.map((id, i) => ({ id, queue_name: 'idle-a', payload: { i }, priority: 3, max_attempts: 7, delayed: true })));
    expect(await read(mixed)).toEqual(
      mixed.map((id, i) => ({ id, queue_name: i % 2 ? 'idle-a' : 'idle-b', payload: { i }, priority: i % 3, max_attempts: 5, delayed: i % 5 === 0 })),
    );
  });
});
