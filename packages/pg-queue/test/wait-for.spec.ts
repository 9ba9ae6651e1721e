import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { JobFailedError, JobHandler, JobWaitTimeoutError, PgQueueError, QueueService, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { AdminStore } from '../src/store/admin.store.js';
import { JobWaiters } from '../src/waiting/job-waiters.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

const release = new Map<string, () => void>();

@Injectable()
class Handlers {
  @JobHandler('wf-report')
  async report(job: Job<{ n: number }>) {
    return { total: job.payload.n * 10 };
  }

  @JobHandler('wf-held')
  async held(job: Job<{ answer?: unknown }>) {
    await new Promise<void>((resolve) => {
      release.set(job.id, resolve);
      job.signal.addEventListener('abort', () => resolve());
    });
    return job.payload.answer;
  }

  @JobHandler('wf-fail', { maxAttempts: 2, backoff: { baseMs: 10, maxMs: 10 } })
  async fail(job: Job) {
    throw new Error(`broken on attempt ${job.attempt}`);
  }
}

/** A waitFor that timed out says where its job stood, so a failure tells which side (the worker, the poll) was late. */
const withRowState = (id: string) => async (error: unknown) => {
  if (!(error instanceof JobWaitTimeoutError)) throw error;
  const probe = new pg.Client({ connectionString: dbUrl });
  await probe.connect();
  const { rows } = await probe
    .query(`SELECT status, attempts, awaited, locked_by, (run_at - now())::text AS due_in, (now() - updated_at)::text AS since_update FROM background_jobs WHERE id = $1`, [id])
    .finally(() => probe.end());
  throw new Error(`${error.message}; the row: ${JSON.stringify(rows[0])}`);
};
let dbUrl = '';

/** The waiters still registered in an app: a settled, timed-out or aborted waitFor leaves none behind. */
const waitersLeft = (app: INestApplicationContext) => (app.get(JobWaiters, { strict: false }) as unknown as { waiting: Map<string, unknown> }).waiting.size;

describe('waitFor: waiting for a job from anywhere', () => {
  let url: string;
  let db: pg.Pool;
  let worker: INestApplicationContext;
  let producer: INestApplicationContext;
  let deaf: INestApplicationContext;
  let done: pg.Client;
  const notices: string[] = [];

  beforeAll(async () => {
    url = await createTestDatabase('waitfor');
    dbUrl = url;
    db = sqlPool(url);
    worker = await startApp(url, { providers: [Handlers], queue: { maintenance: { enabled: false } } });
    // Another app on the same database that runs no workers: it only enqueues and waits.
    producer = await startApp(url, { queue: { workers: false, migrationsRun: false, maintenance: { enabled: false } } });
    // A producer whose LISTEN can never connect (closed port): only the poll fallback can tell it.
    deaf = await startApp(url, {
      queue: { workers: false, migrationsRun: false, listenerUrl: 'postgres://postgres@127.0.0.1:1/none', fallbackPollIntervalMs: 50, maintenance: { enabled: false } },
      logLevels: [],
    });
    done = new pg.Client({ connectionString: url });
    await done.connect();
    done.on('notification', (n) => notices.push(n.payload ?? ''));
    await done.query('LISTEN pg_queue_done');
  });
  afterAll(async () => {
    await done?.end();
    await deaf?.close();
    await producer?.close();
    await worker?.close();
    await db?.end();
  });

  it("resolves with the result, in another app than the worker's; a job that already finished resolves at once", async () => {
    const queue = producer.get(QueueService);
    const id = await queue.enqueue('wf-report', { n: 4 });
    await expect(queue.waitFor(id, { timeoutMs: 20_000 })).resolves.toEqual({ total: 40 });
    await expect(queue.waitFor(id)).resolves.toEqual({ total: 40 });
    const held = await queue.enqueue('wf-held', { answer: 'late' });
    await waitFor('running', async () => release.has(held));
    const waiting = queue.waitFor<string>(held);
    await waitFor('marked', async () => (await db.query(`SELECT awaited FROM background_jobs WHERE id = $1`, [held])).rows[0].awaited === true);
    release.get(held)!();
    await expect(waiting).resolves.toBe('late');
    expect(waitersLeft(producer)).toBe(0);
  });

  it('rejects with the last error when the job is dead-lettered, and when it is cancelled; retries in between keep it waiting', async () => {
    const queue = producer.get(QueueService);
    const id = await queue.enqueue('wf-fail', {}, { maxAttempts: 2 });
    const error = await queue.waitFor(id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    expect(error).toMatchObject({ jobId: id, status: 'failed', lastError: expect.stringContaining('broken on attempt 2') });
    expect((await db.query(`SELECT attempts FROM background_jobs WHERE id = $1`, [id])).rows[0].attempts).toBe(2);

    const held = await queue.enqueue('wf-held', {});
    await waitFor('running', async () => release.has(held));
    const waiting = queue.waitFor(held).catch((e: unknown) => e);
    await waitFor('marked', async () => (await db.query(`SELECT awaited FROM background_jobs WHERE id = $1`, [held])).rows[0].awaited === true);
    expect(await queue.cancel(held)).toBe('cancelled');
    expect(await waiting).toMatchObject({ name: 'JobFailedError', status: 'cancelled', jobId: held });
  });

  it('a bulk cancel (pg-queue jobs cancel, the dashboard) tells the waiters of the jobs it cancels, as cancel(id) does', async () => {
    const queue = producer.get(QueueService);
    const id = await queue.enqueue('wf-report', { n: 1 }, { delayMs: 600_000 });
    const waiting = queue.waitFor(id).catch((e: unknown) => e);
    await waitFor('marked', async () => (await db.query(`SELECT awaited FROM background_jobs WHERE id = $1`, [id])).rows[0].awaited === true);
    const batch = await new AdminStore(db).bulkBatch('cancel', { ids: [id], statuses: ['queued', 'processing'] }, '0', 10);
    expect(batch.changed).toBe(1);
    // The notice itself (the poll would answer too, up to its interval later): sent by the cancel's statement.
    await waitFor('the done notice', async () => notices.includes(`${id}:cancelled`), 5_000);
    expect(await waiting).toMatchObject({ name: 'JobFailedError', status: 'cancelled', jobId: id });
  });

  it('timeout and abort reject with clear errors and leave no waiter behind; bad ids and options are refused', async () => {
    const queue = producer.get(QueueService);
    const held = await queue.enqueue('wf-held', {});
    await waitFor('running', async () => release.has(held));
    const timedOut = await queue.waitFor(held, { timeoutMs: 50 }).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(JobWaitTimeoutError);
    expect((timedOut as Error).message).toBe(`job ${held} did not finish within 50 ms (waitFor timeoutMs); it keeps running`);
    const controller = new AbortController();
    const aborted = queue.waitFor(held, { signal: controller.signal }).catch((e: unknown) => e);
    controller.abort(new Error('caller gave up'));
    expect(await aborted).toMatchObject({ message: 'caller gave up' });
    await expect(queue.waitFor(held, { signal: AbortSignal.abort(new Error('already')) })).rejects.toThrow('already');
    expect(waitersLeft(producer)).toBe(0);
    expect((await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [held])).rows[0].status).toBe('processing');
    release.get(held)!();
    // The mark outlives the waiters that gave up: the finish still sends its (unheard) notice.
    await waitFor('held job finished', async () => (await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [held])).rows[0].status === 'completed');
    await waitFor('its notice', async () => notices.includes(`${held}:completed`));

    await expect(queue.waitFor('999999')).rejects.toThrow(new PgQueueError('waitFor(999999): no such job (never enqueued, pruned past its retention, or deleted as it completed: with completedRetentionMs 0 only the jobs awaited before they finished keep their row).'));
    await expect(queue.waitFor('x1')).rejects.toThrow('Invalid job id "x1"');
    await expect(queue.waitFor(held, { timeoutMs: 0 })).rejects.toThrow('Invalid waitFor(' + held + ') option timeoutMs=0: expected an integer from 1 to 2147483647.');
    expect(waitersLeft(producer)).toBe(0);
  });

  it('sends a finish notice only for jobs someone waits on: queues nobody waits on send none', async () => {
    notices.length = 0;
    const queue = producer.get(QueueService);
    const ids = await queue.enqueueMany(Array.from({ length: 50 }, (_, n) => ({ queue: 'wf-report', payload: { n } })));
    const failing = await queue.enqueue('wf-fail', {}, { maxAttempts: 2 });
    await waitFor('all settled', async () => {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status IN ('completed', 'failed')`, [[...ids, failing]]);
      return rows[0].n === ids.length + 1;
    });
    // Held while the waiter marks it: a job that finished before waitFor's mark sends no notice (waitFor reads it
    // finished at once), which on a slow machine made this test wait for a notice that was never due.
    const awaited = await queue.enqueue('wf-held', {});
    await waitFor('running', async () => release.has(awaited));
    const waiting = queue.waitFor(awaited);
    await waitFor('marked', async () => (await db.query(`SELECT awaited FROM background_jobs WHERE id = $1`, [awaited])).rows[0].awaited === true);
    release.get(awaited)!();
    await waiting;
    await waitFor('the notice', async () => notices.length > 0);
    await new Promise((r) => setTimeout(r, 100));
    expect(notices).toEqual([`${awaited}:completed`]);
  });

  it('resolves through the poll when no notice can reach the waiter (LISTEN down, as behind a misconfigured pooler)', async () => {
    const queue = deaf.get(QueueService);
    const id = await queue.enqueue('wf-held', { answer: { total: 70 } });
    await waitFor('running', async () => release.has(id));
    const waiting = queue.waitFor(id, { timeoutMs: 20_000 });
    await waitFor('marked', async () => (await db.query(`SELECT awaited FROM background_jobs WHERE id = $1`, [id])).rows[0].awaited === true);
    expect((deaf.get(JobWaiters, { strict: false }) as unknown as { listener: { connected: boolean } }).listener.connected).toBe(false);
    release.get(id)!();
    await expect(waiting.catch(withRowState(id))).resolves.toEqual({ total: 70 });
    const failing = await queue.enqueue('wf-fail', {}, { maxAttempts: 2 });
    const error = await queue
      .waitFor(failing, { timeoutMs: 20_000 })
      .catch(withRowState(failing))
      .then(
        () => new Error('resolved'),
        (e: unknown) => e,
      );
    // Compared as text so that a timeout shows its row state in the report (toBeInstanceOf prints only the class).
    expect(error instanceof JobFailedError ? 'JobFailedError' : String(error)).toBe('JobFailedError');
  });
});
