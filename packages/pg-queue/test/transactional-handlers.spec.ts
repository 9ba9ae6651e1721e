import { Injectable } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { DataSource } from 'typeorm';
import { JobHandler, PgQueueModule, QueueService, type TransactionalJob } from 'nestjs-pg-queue';
import { SQL } from '../src/store/job.sql.js';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';
import type { INestApplicationContext } from '@nestjs/common';
import { getQueueTestKit } from 'nestjs-pg-queue/testing';
import { startTestingApp } from './support/testing-app.js';

// Transactional handlers (docs/guides/transactional-handlers.md): the handler's writes through job.manager and the
// job's completion commit together, or neither lands. Everything is asserted from the tables: `ledger` holds one row
// per handler write that committed. The app's DataSource has a pool of 2 connections, fewer than the handlers that
// want one, so the starvation set-up runs in every test.
const gates = new Map<string, () => void>();
/** Each attempt's transaction, `id:attempt` -> its backend and start (now() in it is pg_stat_activity's xact_start). */
const transactions = new Map<string, { pid: number; xact: string }>();
const APP_POOL = 2;

type Entry = { amount: number; hold?: boolean; failFirst?: boolean; bigint?: boolean; slowFirst?: boolean; step?: boolean; spawn?: boolean };

@Injectable()
class Handlers {
  @JobHandler('tx-ledger', { transactional: true, concurrency: 4, maxAttempts: 3, backoff: { baseMs: 0, jitter: false }, timeoutMs: 1_500 })
  async post(job: TransactionalJob<Entry>) {
    const [tx] = await job.manager.query(`SELECT pg_backend_pid() AS pid, now()::text AS xact`);
    transactions.set(`${job.id}:${job.attempt}`, tx);
    await job.manager.query(`INSERT INTO ledger (job_id, amount, attempt) VALUES ($1, $2, $3)`, [job.id, job.payload.amount, job.attempt]);
    if (job.payload.hold && job.attempt === 1) await new Promise<void>((resolve) => gates.set(job.id, resolve));
    if (job.payload.slowFirst && job.attempt === 1) await new Promise((resolve) => setTimeout(resolve, 2_500)); // past timeoutMs
    if (job.payload.failFirst && job.attempt === 1) throw new Error('ledger service said no');
    if (job.payload.step) await job.step('s', () => 1);
    if (job.payload.spawn) await job.spawn([{ ref: 'receipt', queue: 'tx-receipt', payload: { of: job.id } }]);
    if (job.payload.bigint) return { total: 10n };
    return { posted: job.payload.amount };
  }

  @JobHandler('tx-receipt')
  async receipt() {}

  /** Holds its connection of the app's pool until the test lets it go. */
  @JobHandler('tx-hog', { transactional: true, concurrency: 4 })
  async hog(job: TransactionalJob) {
    await job.manager.query(`INSERT INTO ledger (job_id, amount, attempt) VALUES ($1, 0, $2)`, [job.id, job.attempt]);
    await new Promise<void>((resolve) => gates.set(job.id, resolve));
  }
}

describe('transactional handlers', () => {
  let url: string;
  let db: pg.Pool;
  let dataSource: DataSource;
  let app: INestApplicationContext;
  const ledger = async (id: string) => (await db.query(`SELECT amount, attempt FROM ledger WHERE job_id = $1 ORDER BY attempt`, [id])).rows;
  const row = async (id: string) => (await db.query(`SELECT status, attempts, last_error, result FROM background_jobs WHERE id = $1`, [id])).rows[0];
  /** The transaction of attempt `attempt` of job `id` has ended (committed or rolled back): its backend runs no transaction begun then. */
  const transactionEnded = (id: string, attempt: number) =>
    waitFor(`the transaction of job ${id}'s attempt ${attempt} to end`, async () => {
      const tx = transactions.get(`${id}:${attempt}`);
      return tx !== undefined && (await db.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND xact_start = $2::timestamptz`, [tx.pid, tx.xact])).rowCount === 0;
    }, 10_000, 10);

  beforeAll(async () => {
    url = await createTestDatabase('tx-handlers');
    db = sqlPool(url);
    await db.query(`CREATE TABLE ledger (job_id int8, amount int, attempt int)`);
    dataSource = new DataSource({ type: 'postgres', url, extra: { max: APP_POOL } });
    app = await startApp(url, {
      providers: [Handlers],
      imports: [PgQueueModule.forRoot({ dataSource, leaseMs: 2_000, heartbeatMs: 300, maintenance: { sweepIntervalMs: 200 } })],
    });
  });
  afterAll(async () => {
    for (const release of gates.values()) release();
    await app?.close();
    await dataSource?.destroy();
    await db?.end();
  });

  it('commits the handler’s write with the completion: one ledger row, the job completed with its result', async () => {
    const queue = app.get(QueueService);
    const id = await queue.enqueue('tx-ledger', { amount: 5 });
    expect(await queue.waitFor(id, { timeoutMs: 10_000 })).toEqual({ posted: 5 });
    expect(await ledger(id)).toEqual([{ amount: 5, attempt: 1 }]);
    expect(await row(id)).toMatchObject({ status: 'completed', attempts: 1, result: { posted: 5 } });
  });

  it('a failure rolls the write back and is recorded outside the transaction; the retry writes once', async () => {
    const queue = app.get(QueueService);
    const id = await queue.enqueue('tx-ledger', { amount: 7, failFirst: true });
    await queue.waitFor(id, { timeoutMs: 10_000 });
    expect(await ledger(id)).toEqual([{ amount: 7, attempt: 2 }]);
    expect(await row(id)).toMatchObject({ status: 'completed', attempts: 2, last_error: expect.stringContaining('ledger service said no') });
  });

  it('a result that cannot be stored rolls the write back and fails the job for good', async () => {
    const queue = app.get(QueueService);
    const id = await queue.enqueue('tx-ledger', { amount: 1, bigint: true });
    await waitFor('failed', async () => (await row(id))?.status === 'failed');
    expect(await ledger(id)).toEqual([]);
    expect((await row(id)).last_error).toMatch(/the handler's result cannot be stored: it is not JSON \(a BigInt/);
  });

  it('a timed-out attempt rolls back when the handler returns late; the retry writes once', async () => {
    const queue = app.get(QueueService);
    const id = await queue.enqueue('tx-ledger', { amount: 3, slowFirst: true });
    await queue.waitFor(id, { timeoutMs: 15_000 });
    await transactionEnded(id, 1); // the first attempt's handler returned late, and its transaction is over
    expect(await ledger(id)).toEqual([{ amount: 3, attempt: 2 }]);
    expect(await row(id)).toMatchObject({ status: 'completed', attempts: 2, last_error: expect.stringContaining('timed out') });
  });

  it('a lease lost while the handler runs (swept and run again): the first attempt’s write never lands', async () => {
    const queue = app.get(QueueService);
    const id = await queue.enqueue('tx-ledger', { amount: 9, hold: true });
    await waitFor('holding', async () => gates.has(id));
    // What the sweeper does to a lapsed lease, with the lapse and the sweep in one transaction (the heartbeat cannot renew in between).
    const client = await db.connect();
    try {
      await client.query('BEGIN');
      await client.query(`UPDATE background_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [id]);
      await client.query(SQL.rescueExpiredLeases);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(await queue.waitFor(id, { timeoutMs: 10_000 })).toEqual({ posted: 9 });
    gates.get(id)!(); // the first attempt's handler returns now, its lease long gone
    await transactionEnded(id, 1);
    expect(await ledger(id)).toEqual([{ amount: 9, attempt: 2 }]);
    expect(await row(id)).toMatchObject({ status: 'completed', attempts: 2 });
  });

  it('steps are refused in a transactional handler, naming why; its write rolls back', async () => {
    const queue = app.get(QueueService);
    const id = await queue.enqueue('tx-ledger', { amount: 2, step: true }, { maxAttempts: 1 });
    await waitFor('failed', async () => (await row(id))?.status === 'failed');
    expect((await row(id)).last_error).toMatch(/step "s" in a transactional handler: its record would outlive a rolled-back transaction/);
    expect(await ledger(id)).toEqual([]);
  });

  it('children spawned by a transactional handler are created in its transaction, with the completion', async () => {
    const queue = app.get(QueueService);
    const flow = await queue.enqueueFlow({ jobs: [{ ref: 'post', queue: 'tx-ledger', payload: { amount: 4, spawn: true } }] });
    const done = await queue.waitForFlow(flow.id, { timeoutMs: 10_000 });
    expect(done.status).toBe('completed');
    const jobs = (await db.query(`SELECT flow_ref, status FROM background_jobs WHERE flow_id = $1 ORDER BY id`, [flow.id])).rows;
    expect(jobs).toEqual([{ flow_ref: 'post', status: 'completed' }, { flow_ref: 'post/receipt', status: 'completed' }]);
    expect(await ledger(flow.jobs.post)).toEqual([{ amount: 4, attempt: 1 }]);
  });

  it('handlers holding every connection of the app’s pool never hold up the queue: enqueues, heartbeats and claims go on', async () => {
    const queue = app.get(QueueService);
    const hogs = await queue.enqueueMany(Array.from({ length: 4 }, () => ({ queue: 'tx-hog', payload: {} })));
    // Two handlers hold the app pool's two connections; the other two wait for one.
    await waitFor('pool taken', async () => hogs.filter((id) => gates.has(id)).length === APP_POOL);
    const waiting = hogs.filter((id) => !gates.has(id));
    // Past several leases: heartbeats (the queue's own pool) keep all four leases, the waiting ones included.
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    const id = await queue.enqueue('tx-receipt', {});
    await queue.waitFor(id, { timeoutMs: 5_000 });
    const held = (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'processing' AND attempts = 1`, [hogs])).rows[0].n;
    expect(held).toBe(4);
    for (const hog of hogs) if (gates.has(hog)) gates.get(hog)!();
    await waitFor('the waiting two ran', async () => waiting.every((w) => gates.has(w)));
    for (const w of waiting) gates.get(w)!();
    for (const hog of hogs) await queue.waitFor(hog, { timeoutMs: 10_000 });
    const rows = (await db.query(`SELECT job_id::text AS id, attempt FROM ledger WHERE job_id = ANY($1::int8[]) ORDER BY job_id`, [hogs])).rows;
    expect(rows).toEqual(hogs.map((h) => ({ id: h, attempt: 1 })));
  }, 30_000);

  it('a transactional handler in a module without a DataSource fails the boot, naming the fix', async () => {
    await expect(startApp(url, { providers: [Handlers], queue: { workers: true } })).rejects.toThrow(
      /Handlers\.post \(queue "tx-ledger" of PgQueueModule\): transactional: true runs the handler and the job's completion in one transaction of a TypeORM DataSource on the queue's own database, and this module has none: it was given `connection` only\..*replace `connection` with `dataSource`/,
    );
  });

  it('transactional must be true or false', async () => {
    await expect(startApp(url, { queue: { workers: false, queues: { q: { transactional: 'yes' as never } } } })).rejects.toThrow(/transactional/);
  });
});

describe('transactional handlers in the testing kit', () => {
  it('drain() runs them in a transaction of the app’s DataSource: a completion commits the write, a failure rolls it back', async () => {
    const url = await createTestDatabase('tx-kit');
    const db = sqlPool(url);
    await db.query(`CREATE TABLE ledger (job_id int8, amount int, attempt int)`);
    const dataSource = new DataSource({ type: 'postgres', url });
    const app = await startTestingApp([PgQueueModule.forRoot({ dataSource, maintenance: { enabled: false } })], [Handlers]);
    try {
      const queue = app.get(QueueService);
      const ok = await queue.enqueue('tx-ledger', { amount: 1 });
      const failing = await queue.enqueue('tx-ledger', { amount: 2, failFirst: true }, { maxAttempts: 1 });
      const drained = await getQueueTestKit(app).drain({ queue: 'tx-ledger' });
      expect(drained.map((d) => [d.id, d.outcome])).toEqual([[ok, 'completed'], [failing, 'failed']]);
      expect((await db.query(`SELECT job_id::text AS id, amount FROM ledger ORDER BY job_id`)).rows).toEqual([{ id: ok, amount: 1 }]);
      expect((await db.query(`SELECT status, result FROM background_jobs WHERE id = $1`, [ok])).rows).toEqual([{ status: 'completed', result: { posted: 1 } }]);
    } finally {
      await app.close();
      await dataSource.destroy();
      await db.end();
    }
  });
});
