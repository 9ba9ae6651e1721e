import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { createDatabase, startPostgres, type PostgresServer } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// Durable steps through a database restart (a server of this spec's own: restarting the shared one would pull it
// from under the other suites). Jobs of two steps run while PostgreSQL stops (every session terminated) and
// starts again 1.5 s later. A step records its result the moment it succeeds (README: "Durable steps"): a step
// recorded before the outage never runs again; one whose record the outage lost runs again (at least once per
// step). Asserted from the jobs' recorded steps and from each step function's calls.

/** Each step function's calls: `${jobId}:${step}` -> the number of calls, and when each one's record landed. */
const calls = new Map<string, number>();
const recordedAt = new Map<string, number>();
let stepMs = { a: 20, b: 300 };

@Injectable()
class TwoStepHandler {
  @JobHandler('two-steps', { concurrency: 8, maxAttempts: 25, backoff: { baseMs: 50, maxMs: 200 } })
  async run(job: Job<{ n: number }>) {
    const step = async (name: 'a' | 'b') => {
      const key = `${job.id}:${name}`;
      const result = await job.step(name, async () => {
        calls.set(key, (calls.get(key) ?? 0) + 1);
        await new Promise((resolve) => setTimeout(resolve, stepMs[name]));
        return { n: job.payload.n, step: name };
      });
      // Reached with the record in the table (or read back from it on a later attempt): the first time only.
      if (!recordedAt.has(key)) recordedAt.set(key, performance.now());
      return result;
    };
    const a = await step('a');
    const b = await step('b');
    return { a: a.step, b: b.step };
  }
}

describe('durable steps through a PostgreSQL restart', () => {
  let server: PostgresServer;
  let app: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    server = await startPostgres({ url: null, containers: false });
    const url = await createDatabase(server.url, 'steps_restart');
    db = sqlPool(url);
    db.on('error', () => undefined);
    app = await startApp(url, {
      providers: [TwoStepHandler],
      queue: { leaseMs: 3_000, heartbeatMs: 500, pollIntervalMs: 500, fallbackPollIntervalMs: 200, maintenance: { sweepIntervalMs: 300 } },
    });
  }, 120_000);

  afterAll(async () => {
    await app?.close();
    await db?.end();
    await server?.stop();
  });

  it('a step recorded before the outage never runs again; every job completes with each step recorded once', async () => {
    stepMs = { a: 20, b: 300 };
    const ids = await app.get(QueueService).enqueueMany(Array.from({ length: 60 }, (_, n) => ({ queue: 'two-steps', payload: { n } })));
    // Mid-run: some jobs done, others between or inside their steps.
    await waitFor('a first batch of steps recorded', async () => [...recordedAt.keys()].filter((k) => k.endsWith(':b')).length >= 8, 30_000, 5);
    const stoppedAt = performance.now();
    const recordedBefore = new Set([...recordedAt].filter(([, at]) => at < stoppedAt).map(([key]) => key));
    if (!server.restart) throw new Error(`a ${server.source} server cannot be restarted by this spec`);
    await server.restart(1_500);
    await waitFor('all 60 jobs completed', async () => {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'completed'`, [ids]).catch(() => ({ rows: [{ n: -1 }] }));
      return rows[0].n === ids.length;
    }, 60_000, 100);

    const { rows } = await db.query<{ id: string; steps: { name: string }[]; attempts: number; result: unknown }>(
      `SELECT id::text, steps, attempts, result FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id`,
      [ids],
    );
    // Each job recorded a, then b, once each, and completed with the steps' results.
    expect(rows.filter((r) => JSON.stringify((r.steps ?? []).map((s) => s.name)) !== '["a","b"]' || JSON.stringify(r.result) !== '{"a":"a","b":"b"}')).toEqual([]);
    // Some jobs were not finished when the server went down (their step b not yet recorded).
    const unfinished = ids.filter((id) => !recordedBefore.has(`${id}:b`)).length;
    const retried = rows.filter((r) => r.attempts > 1).length;
    // A step recorded before the outage ran exactly once, whatever its job went through after.
    const ranAgain = [...recordedBefore].filter((key) => calls.get(key) !== 1);
    // Every step function ran at least once; more than once only for steps whose record the outage lost.
    const again = [...calls].filter(([, n]) => n > 1).map(([key]) => key);
    console.log(`steps through a restart: ${recordedBefore.size} steps recorded before it, ${unfinished} jobs unfinished at the stop, ${retried} jobs retried, ${again.length} steps ran again (their record lost to the outage)`);
    expect(recordedBefore.size).toBeGreaterThan(0);
    expect(ranAgain).toEqual([]);
    expect(again.filter((key) => recordedBefore.has(key))).toEqual([]);
    expect(ids.flatMap((id) => ['a', 'b'].map((s) => `${id}:${s}`)).filter((key) => (calls.get(key) ?? 0) < 1)).toEqual([]);
    expect(unfinished).toBeGreaterThan(0);
  }, 120_000);
});
