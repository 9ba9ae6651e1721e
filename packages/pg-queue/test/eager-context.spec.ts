import { AsyncLocalStorage } from 'node:async_hooks';
import { Injectable } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import { PgQueueModule } from 'nestjs-pg-queue';
import { getQueueTestKit } from 'nestjs-pg-queue/testing';
import { createTestDatabase } from '@internal/pg-harness';
import { startTestingApp } from './support/testing-app.js';
import { context, createContextKey } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { sqlPool, useTestApp, waitFor } from './support/test-app.js';

// Issue 39 item 6: a handler never runs in the caller's async context. An eager start (QueueWorker.startEagerly)
// begins inside the enqueue's call; the handler used to run there and saw (and could change) the caller's
// AsyncLocalStorage stores and its active OpenTelemetry context. Each handler records what it saw in ctx_runs;
// the assertions read that table and the jobs' rows. The same with nestjs-cls and @nestjs-cls/transactional, whose
// packages Jest cannot load: test/eager-context-cls.spec.ts.

/** The app's request store, as a CLS library keeps one. */
const requests = new AsyncLocalStorage<{ request: string; user: string }>();
const KEY = createContextKey('the caller’s OpenTelemetry context value');
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

let record: (job: Job, saw: object) => Promise<void>;

@Injectable()
class Handlers {
  /** Records what it sees, and tries to change the request's store (a handler setting "its" user). */
  private async see(job: Job): Promise<void> {
    const store = requests.getStore();
    const saw = { store: store ? { ...store } : null, otel: context.active().getValue(KEY) ?? null, attempt: job.attempt };
    if (store) store.user = `changed by job ${job.id}`;
    await record(job, saw);
  }

  @JobHandler('ctx-eager', { concurrency: 2 })
  async eager(job: Job) {
    await this.see(job);
  }

  @JobHandler('ctx-retry', { concurrency: 2, maxAttempts: 2, backoff: () => 0 })
  async retried(job: Job) {
    await this.see(job);
    if (job.attempt === 1) throw new Error('first attempt fails');
  }

  @JobHandler('ctx-timeout', { concurrency: 1, timeoutMs: 300, maxAttempts: 1 })
  async timedOut(job: Job) {
    // The abort listener runs where the timeout's timer was set: the worker's context, not the enqueuer's.
    job.signal.addEventListener('abort', () => void this.see(job), { once: true });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}

describe('a handler runs in the worker’s async context, never the enqueuer’s (issue 39 item 6)', () => {
  const t = useTestApp('eager-context', { providers: [Handlers], queue: { workerId: 'ctx-worker', pollIntervalMs: 60_000, maintenance: { enabled: false } } }, async (db) => {
    await db.query(`CREATE TABLE ctx_runs (job_id bigint, attempt int, saw jsonb)`);
  });
  beforeAll(async () => {
    // How each row was inserted: 'processing' is an eager start (the insert claimed it), 'queued' a claim's job.
    await t.db.query(`CREATE TABLE ctx_inserted (job_id bigint, status text)`);
    await t.db.query(`CREATE FUNCTION ctx_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO ctx_inserted VALUES (NEW.id, NEW.status::text); RETURN NEW; END $$`);
    await t.db.query(`CREATE TRIGGER ctx_log AFTER INSERT ON background_jobs FOR EACH ROW EXECUTE FUNCTION ctx_log()`);
    // The workers' first claims have come back: an enqueue now finds its worker idle (an eager start).
    const queue = t.app.get(QueueService);
    const warm = await queue.enqueue('ctx-eager', {});
    await waitFor('the warm-up job completed', async () => (await row(warm))?.status === 'completed');
  });
  const insertedAs = async (id: string) => (await t.db.query<{ status: string }>(`SELECT status FROM ctx_inserted WHERE job_id = $1`, [id])).rows[0]?.status;
  record = async (job, saw) => void (await t.db.query(`INSERT INTO ctx_runs (job_id, attempt, saw) VALUES ($1, $2, $3)`, [job.id, job.attempt, JSON.stringify(saw)]));

  const runsOf = async (id: string) => (await t.db.query<{ attempt: number; saw: { store: unknown; otel: unknown } }>(`SELECT attempt, saw FROM ctx_runs WHERE job_id = $1 ORDER BY attempt`, [id])).rows;
  const row = async (id: string) => (await t.db.query<{ status: string; attempts: number; locked_by: string | null; fence_token: string }>(`SELECT status, attempts, locked_by, fence_token FROM background_jobs WHERE id = $1`, [id])).rows[0];

  /** An enqueue inside a request: its ALS store and an OpenTelemetry context value set, as a request handler's would be. */
  async function inRequest<T>(request: string, fn: () => Promise<T>): Promise<{ result: T; store: { request: string; user: string } }> {
    const store = { request, user: 'alice' };
    const result = await requests.run(store, () => context.with(context.active().setValue(KEY, `span of ${request}`), fn));
    return { result, store };
  }

  it('an eager start inside als.run({ request }): the handler sees no store and no OpenTelemetry context of the caller, and cannot change the request’s store', async () => {
    const queue = t.app.get(QueueService);
    const { result: id, store } = await inRequest('req-1', () => queue.enqueue('ctx-eager', {}));
    await waitFor('the job completed', async () => (await row(id))?.status === 'completed');
    // It was the eager start: the insert claimed the row (one attempt, fence token 1).
    expect(await insertedAs(id)).toBe('processing');
    expect(await row(id)).toMatchObject({ attempts: 1, fence_token: '1' });
    expect(await runsOf(id)).toEqual([{ attempt: 1, saw: { store: null, otel: null, attempt: 1 } }]);
    expect(store).toEqual({ request: 'req-1', user: 'alice' });
  });

  it('many eager starts from concurrent requests: none sees any request’s store', async () => {
    const queue = t.app.get(QueueService);
    const calls = await Promise.all(Array.from({ length: 20 }, (_, i) => inRequest(`req-many-${i}`, () => queue.enqueue('ctx-eager', { i }))));
    const ids = calls.map((c) => c.result);
    await waitFor('every job completed', async () => (await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1) AND status = 'completed'`, [ids])).rows[0].n === ids.length);
    const { rows } = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ctx_runs WHERE job_id = ANY($1) AND saw->'store' = 'null' AND saw->'otel' = 'null'`, [ids]);
    expect(rows[0].n).toBe(ids.length);
    for (const { store } of calls) expect(store.user).toBe('alice');
  });

  it('a retry of an eagerly started job (the retry timer, a claim) runs in the worker’s context too', async () => {
    const queue = t.app.get(QueueService);
    const { result: id, store } = await inRequest('req-retry', () => queue.enqueue('ctx-retry', {}));
    await waitFor('the job completed on its retry', async () => (await row(id))?.status === 'completed');
    expect(await insertedAs(id)).toBe('processing');
    expect((await runsOf(id)).map((r) => [r.attempt, r.saw.store, r.saw.otel])).toEqual([
      [1, null, null],
      [2, null, null],
    ]);
    expect(store.user).toBe('alice');
  });

  it('a timeout’s abort, whose timer the eager start set, reaches the handler in the worker’s context', async () => {
    const queue = t.app.get(QueueService);
    const { result: id, store } = await inRequest('req-timeout', () => queue.enqueue('ctx-timeout', {}));
    await waitFor('the job failed on its timeout', async () => (await row(id))?.status === 'failed');
    await waitFor('the abort listener recorded', async () => (await runsOf(id)).length === 1);
    expect(await insertedAs(id)).toBe('processing');
    expect((await runsOf(id)).map((r) => [r.saw.store, r.saw.otel])).toEqual([[null, null]]);
    expect(store.user).toBe('alice');
  });
});

describe('the testing kit runs handlers in a context of its own too', () => {
  let app: INestApplicationContext;
  let db: ReturnType<typeof sqlPool>;
  let kitRuns: { id: string; saw: object }[];

  beforeAll(async () => {
    const url = await createTestDatabase('eager-context-kit');
    db = sqlPool(url);
    kitRuns = [];
    record = async (job, saw) => void kitRuns.push({ id: job.id, saw });
    app = await startTestingApp([PgQueueModule.forRoot({ connection: url, maintenance: { enabled: false } })], [Handlers], 'inline');
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('inline: an enqueue inside als.run runs its job before it returns, in the kit’s context, not the request’s', async () => {
    const queue = app.get(QueueService);
    const store = { request: 'kit-inline', user: 'alice' };
    const id = await requests.run(store, () => context.with(context.active().setValue(KEY, 'kit span'), () => queue.enqueue('ctx-eager', {})));
    expect(kitRuns).toEqual([{ id, saw: { store: null, otel: null, attempt: 1 } }]);
    expect(store.user).toBe('alice');
    expect((await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0].status).toBe('completed');
  });

  it('drain() called inside als.run runs the job in the kit’s context', async () => {
    const queue = app.get(QueueService);
    const id = await queue.enqueue('ctx-eager', {}, { delayMs: 60_000 }); // not due: not run inline
    const store = { request: 'kit-drain', user: 'alice' };
    const drained = await requests.run(store, () => getQueueTestKit(app).drain({ includeScheduled: true }));
    expect(drained.map((d) => [d.id, d.outcome])).toEqual([[id, 'completed']]);
    expect(kitRuns.find((r) => r.id === id)).toEqual({ id, saw: { store: null, otel: null, attempt: 1 } });
    expect(store.user).toBe('alice');
  });
});
