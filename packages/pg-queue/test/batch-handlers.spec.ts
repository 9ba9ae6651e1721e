import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { createTestDatabase } from '@internal/pg-harness';
import { getQueueTestKit } from 'nestjs-pg-queue/testing';
import { JobHandler, PgQueueError, PgQueueModule, QueueService, type BatchJob, type Job } from 'nestjs-pg-queue';
import { SQL } from '../src/store/job.sql.js';
import { startApp, useTestApp, waitFor } from './support/test-app.js';
import { startTestingApp } from './support/testing-app.js';

// Batch handlers (docs/guides/batch-handlers.md): one call takes many jobs. Each call is written to `calls` (queue,
// call number, job ids), so sizes, concurrency and "ran once" are asserted from the table, and every job's outcome
// from background_jobs.
const gates: (() => void)[] = [];
let running = 0;
let mostRunning = 0;
const callNumbers = new Map<string, number>();

@Injectable()
class Handlers {
  constructor(private readonly queue: QueueService) {}

  private async record(queue: string, jobs: Job[]): Promise<number> {
    const n = (callNumbers.get(queue) ?? 0) + 1;
    callNumbers.set(queue, n);
    await this.queue['store']['pool'].query(`INSERT INTO calls (queue, n, ids) VALUES ($1, $2, $3)`, [queue, n, jobs.map((j) => j.id)]);
    return n;
  }

  @JobHandler('b-index', { batch: { size: 100 }, concurrency: 1 })
  async index(jobs: BatchJob<{ i: number }>[]) {
    await this.record('b-index', jobs);
  }

  /** Each payload says how its job ends: complete with a result, fail, snooze (once), or nothing (the call's outcome). */
  @JobHandler('b-mixed', { batch: { size: 10, waitMs: 100 }, maxAttempts: 1 })
  async mixed(jobs: BatchJob<{ how: 'complete' | 'fail' | 'snooze' | 'none' }>[]) {
    const n = await this.record('b-mixed', jobs);
    for (const job of jobs) {
      if (job.payload.how === 'complete') job.complete({ done: job.id });
      if (job.payload.how === 'fail') job.fail(new Error(`job ${job.id} refused by the index`));
      if (job.payload.how === 'snooze' && n === 1) job.snooze(200);
    }
    return 'ignored';
  }

  @JobHandler('b-throws', { batch: { size: 10, waitMs: 100 }, maxAttempts: 2, backoff: { baseMs: 0, jitter: false } })
  async throws(jobs: BatchJob[]) {
    const n = await this.record('b-throws', jobs);
    if (n === 1) throw new Error('bulk API down');
  }

  @JobHandler('b-held', { batch: { size: 5 }, concurrency: 2 })
  async held(jobs: BatchJob[]) {
    await this.record('b-held', jobs);
    running += 1;
    mostRunning = Math.max(mostRunning, running);
    await new Promise<void>((resolve) => gates.push(resolve));
    running -= 1;
  }

  @JobHandler('b-gather', { batch: { size: 10, waitMs: 400 } })
  async gather(jobs: BatchJob[]) {
    await this.record('b-gather', jobs);
  }

  /** The first call waits for the test; every call completes its jobs with its call number. */
  @JobHandler('b-lease', { batch: { size: 5 }, concurrency: 1, maxAttempts: 5 })
  async lease(jobs: BatchJob[]) {
    const n = await this.record('b-lease', jobs);
    if (n === 1) await new Promise<void>((resolve) => gates.push(resolve));
    for (const job of jobs) job.complete({ call: n });
  }

  /** Waits until the job of payload.cancel is aborted, then completes the rest. */
  @JobHandler('b-cancel', { batch: { size: 5 }, maxAttempts: 1 })
  async cancel(jobs: BatchJob<{ victim: boolean }>[]) {
    await this.record('b-cancel', jobs);
    const victim = jobs.find((j) => j.payload.victim)!;
    await new Promise((resolve) => victim.signal.addEventListener('abort', resolve));
    for (const job of jobs) job.complete({ victimAborted: victim.signal.aborted });
  }

  @JobHandler('b-timeout', { batch: { size: 3, waitMs: 100 }, timeoutMs: 300, maxAttempts: 2, backoff: { baseMs: 0, jitter: false } })
  async timeout(jobs: BatchJob[]) {
    const n = await this.record('b-timeout', jobs);
    if (n === 1) await new Promise(() => undefined); // hangs past timeoutMs
  }

  /** Not a batch handler: complete() is refused. */
  @JobHandler('b-single', { maxAttempts: 1 })
  async single(job: Job) {
    (job as BatchJob).complete();
  }
}

describe('batch handlers', () => {
  const t = useTestApp('batches', { providers: [Handlers], queue: { leaseMs: 2_000, heartbeatMs: 300, maintenance: { sweepIntervalMs: 200 } } }, (db) =>
    db.query(`CREATE TABLE calls (id serial, queue text, n int, ids int8[])`),
  );
  const calls = async (queue: string) => (await t.db.query(`SELECT n, ids::text[] AS ids FROM calls WHERE queue = $1 ORDER BY id`, [queue])).rows as { n: number; ids: string[] }[];
  const rows = async (ids: string[]) =>
    (await t.db.query(`SELECT id::text, status, attempts, result, last_error FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id`, [ids])).rows;

  it('250 due jobs: calls of 100, 100 and 50, each job in one call, all completed', async () => {
    const queue = t.app.get(QueueService);
    const ids = await queue.enqueueMany(Array.from({ length: 250 }, (_, i) => ({ queue: 'b-index', payload: { i } })));
    await waitFor('all completed', async () => (await rows(ids)).every((r) => r.status === 'completed'));
    const made = await calls('b-index');
    expect(made.map((c) => c.ids.length)).toEqual([100, 100, 50]);
    expect(made.flatMap((c) => c.ids).sort()).toEqual([...ids].sort());
    expect((await rows(ids)).every((r) => r.attempts === 1 && r.result === null)).toBe(true);
  });

  it('per-job outcomes: complete with a result, fail, snooze, and the call’s own outcome for the rest', async () => {
    const queue = t.app.get(QueueService);
    const [done, failed, snoozed, plain] = await queue.enqueueMany((['complete', 'fail', 'snooze', 'none'] as const).map((how) => ({ queue: 'b-mixed', payload: { how } })));
    await waitFor('settled', async () => (await rows([done, failed, snoozed, plain])).every((r) => r.status === 'completed' || r.status === 'failed'));
    const [a, b, c, d] = await rows([done, failed, snoozed, plain]);
    expect(a).toMatchObject({ status: 'completed', result: { done } });
    expect(b).toMatchObject({ status: 'failed', attempts: 1, last_error: expect.stringContaining(`job ${failed} refused by the index`) });
    expect(c).toMatchObject({ status: 'completed', attempts: 1 }); // snoozed once (uncharged), then completed in a later call
    expect(d).toMatchObject({ status: 'completed', result: null }); // what the call returned is no job's result
    const made = await calls('b-mixed');
    expect(made[0].ids.sort()).toEqual([done, failed, snoozed, plain].sort());
    expect(made.slice(1).flatMap((m) => m.ids)).toEqual([snoozed]);
  });

  it('a call that throws fails each of its jobs on its own attempt; the retry call completes them', async () => {
    const queue = t.app.get(QueueService);
    const ids = await queue.enqueueMany(Array.from({ length: 3 }, () => ({ queue: 'b-throws', payload: {} })));
    await waitFor('completed', async () => (await rows(ids)).every((r) => r.status === 'completed'));
    expect((await rows(ids)).map((r) => [r.attempts, r.last_error?.split('\n')[0]])).toEqual(ids.map(() => [2, 'Error: bulk API down']));
  });

  it('concurrency counts calls: at most 2 calls of at most 5 jobs at once', async () => {
    const queue = t.app.get(QueueService);
    const ids = await queue.enqueueMany(Array.from({ length: 22 }, () => ({ queue: 'b-held', payload: {} })));
    for (let released = 0; released < 5; released++) {
      await waitFor('a call waiting', async () => gates.length > 0);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(running).toBeLessThanOrEqual(2);
      gates.shift()!();
    }
    await waitFor('rest', async () => {
      while (gates.length) gates.shift()!();
      return (await rows(ids)).every((r) => r.status === 'completed');
    });
    expect(mostRunning).toBe(2);
    const made = await calls('b-held');
    expect(made.every((c) => c.ids.length <= 5)).toBe(true);
    expect(made.flatMap((c) => c.ids).sort()).toEqual([...ids].sort());
  });

  it('waitMs lets a batch fill: three jobs enqueued 50 ms apart run in one call', async () => {
    const queue = t.app.get(QueueService);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(await queue.enqueue('b-gather', {}));
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await waitFor('completed', async () => (await rows(ids)).every((r) => r.status === 'completed'));
    expect((await calls('b-gather')).map((c) => c.ids.sort())).toEqual([[...ids].sort()]);
  });

  it('a call that loses one job’s lease settles none of its jobs: every job is completed by a later call', async () => {
    const queue = t.app.get(QueueService);
    const ids = await queue.enqueueMany(Array.from({ length: 5 }, () => ({ queue: 'b-lease', payload: {} })));
    await waitFor('first call waiting', async () => gates.length === 1);
    // What the sweeper does to one lapsed lease, lapse and sweep in one transaction (no heartbeat in between).
    const client = await t.db.connect();
    try {
      await client.query('BEGIN');
      await client.query(`UPDATE background_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [ids[0]]);
      await client.query(SQL.rescueExpiredLeases);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    await new Promise((resolve) => setTimeout(resolve, 800)); // a heartbeat or two: the loss is seen
    gates.shift()!(); // the first call completes every job: none of it may land
    await waitFor('completed', async () => (await rows(ids)).every((r) => r.status === 'completed'), 30_000);
    const done = await rows(ids);
    expect(done.map((r) => (r.result as { call: number }).call >= 2)).toEqual(ids.map(() => true));
    expect(done.every((r) => r.attempts === 2)).toBe(true);
  }, 40_000);

  it('a cancel of one job of a running call aborts that job’s signal only; the others complete', async () => {
    const queue = t.app.get(QueueService);
    const ids = await queue.enqueueMany([false, true, false].map((victim) => ({ queue: 'b-cancel', payload: { victim } })));
    await waitFor('in the call', async () => (await calls('b-cancel')).length === 1);
    expect(await queue.cancel(ids[1])).toBe('cancelled');
    await waitFor('settled', async () => (await rows(ids)).every((r) => r.status !== 'processing'));
    expect((await rows(ids)).map((r) => [r.status, r.result])).toEqual([
      ['completed', { victimAborted: true }],
      ['cancelled', null],
      ['completed', { victimAborted: true }],
    ]);
  });

  it('a call past timeoutMs fails its jobs (each its own attempt); the retry call completes them', async () => {
    const queue = t.app.get(QueueService);
    const ids = await queue.enqueueMany(Array.from({ length: 3 }, () => ({ queue: 'b-timeout', payload: {} })));
    await waitFor('completed', async () => (await rows(ids)).every((r) => r.status === 'completed'), 10_000);
    expect((await rows(ids)).map((r) => [r.attempts, /timed out after 300 ms/.test(r.last_error)])).toEqual(ids.map(() => [2, true]));
  });

  it('complete(), fail() and snooze() outside a batch handler are refused, naming why', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('b-single', {});
    await waitFor('failed', async () => (await rows([id]))[0].status === 'failed');
    expect((await rows([id]))[0].last_error).toMatch(/complete\(\) settles one job of a batch handler's call/);
  });
});

describe('batch handler options', () => {
  it.each([
    [{ batch: { size: 0 } }, /batch\.size.*an integer from 1 to 1000/],
    [{ batch: { size: 10, waitMs: -1 } }, /batch\.waitMs.*an integer from 0 to 60000/],
    [{ batch: { size: 10, other: 1 } }, /Unknown .* batch option "other"/],
    [{ batch: { size: 10 }, prefetch: 5 }, /prefetch cannot be used with batch/],
    [{ batch: { size: 10 }, batchSize: 5 }, /batchSize cannot be used with batch/],
    [{ batch: { size: 10 }, transactional: true }, /transactional cannot be used with batch/],
  ])('%j is refused at boot', async (options, message) => {
    await expect(startApp('postgres://unused@127.0.0.1:1/none', { queue: { workers: false, queues: { q: options as never } } })).rejects.toThrow(message);
  });

  it('PgQueueError is what they throw', () => {
    expect(new PgQueueError('x')).toBeInstanceOf(Error);
  });
});

const kitCalls: string[][] = [];

@Injectable()
class KitHandlers {
  /** Calls of up to 3; the job whose payload says so fails on its own, the rest complete with the call. */
  @JobHandler('bk-index', { batch: { size: 3 }, maxAttempts: 1 })
  async index(jobs: BatchJob<{ fail?: boolean }>[]) {
    kitCalls.push(jobs.map((j) => j.id));
    for (const job of jobs) if (job.payload.fail) job.fail(new Error(`job ${job.id} refused`));
  }
}

describe('batch handlers in the testing kit', () => {
  it('drain() runs a batch queue in calls of up to batch.size, each job settled on its own', async () => {
    const url = await createTestDatabase('batch-kit');
    const app = await startTestingApp([PgQueueModule.forRoot({ connection: url, maintenance: { enabled: false } })], [KitHandlers]);
    try {
      const queue = app.get(QueueService);
      const ids = await queue.enqueueMany(Array.from({ length: 7 }, (_, i) => ({ queue: 'bk-index', payload: { fail: i === 4 } })));
      const drained = await getQueueTestKit(app).drain({ queue: 'bk-index' });
      expect(kitCalls.map((c) => c.length)).toEqual([3, 3, 1]);
      expect(drained.map((d) => [d.id, d.outcome])).toEqual(ids.map((id, i) => [id, i === 4 ? 'failed' : 'completed']));
    } finally {
      await app.close();
    }
  });
});
