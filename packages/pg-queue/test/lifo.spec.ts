import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job, type JobHandlerOptions } from 'nestjs-pg-queue';
import { useTestApp, waitFor } from './support/test-app.js';

// Claim order (docs/concepts.md, "Claim order"). LIFO (README, "LIFO"): per queue (`@JobHandler(..., { lifo: true })`)
// and per job (`enqueue(..., { lifo: true })`), through every claim: plain, with read-ahead (fixed and 'auto'), limited
// (globalConcurrency), keyed (concurrencyPerKey) and fair. And priority within a key (README, "Limits"): the keyed and
// fair claims start a key's jobs highest priority first, FIFO or LIFO within each priority. Each queue is paused while its jobs are enqueued one after
// the other, then resumed; its handler (concurrency 1) writes every start into lifo_runs, whose order is the start
// order. Asserted from the tables: the start order against the order the jobs' rows say they must start in.

let db: pg.Pool;

/** The queues of this file: the handler's options, whether its jobs are enqueued LIFO (per job), and with a key. */
const QUEUES: Record<string, { options: JobHandlerOptions; perJob: boolean; keyed?: boolean; priorities?: number[] }> = {
  'fifo-plain': { options: { prefetch: 0 }, perJob: false },
  'lifo-plain': { options: { lifo: true, prefetch: 0 }, perJob: false },
  'lifo-prefetch': { options: { lifo: true, prefetch: 5 }, perJob: false },
  'lifo-auto': { options: { lifo: true }, perJob: false },
  'lifo-global': { options: { lifo: true, globalConcurrency: 1 }, perJob: false },
  'fifo-keyed': { options: { concurrencyPerKey: 1 }, perJob: false, keyed: true, priorities: [0, 5, -3] },
  'fifo-fair': { options: { fairness: true }, perJob: false, keyed: true, priorities: [0, 5, -3] },
  'fifo-fair-plain': { options: { fairness: true, prefetch: 0 }, perJob: false, keyed: true, priorities: [0, 5, -3] },
  'lifo-keyed': { options: { lifo: true, concurrencyPerKey: 1 }, perJob: false, keyed: true, priorities: [0, 5, -3] },
  'lifo-fair': { options: { lifo: true, fairness: true }, perJob: false, keyed: true, priorities: [0, 5, -3] },
  'mixed-plain': { options: { prefetch: 0 }, perJob: true },
  'mixed-prefetch': { options: { prefetch: 4 }, perJob: true },
  'mixed-auto': { options: {}, perJob: true },
  'mixed-global': { options: { globalConcurrency: 1 }, perJob: true },
  'mixed-keyed': { options: { concurrencyPerKey: 1 }, perJob: true, keyed: true, priorities: [0, 5, -3] },
  'mixed-fair': { options: { fairness: true }, perJob: true, keyed: true, priorities: [0, 5, -3] },
};

async function record(job: Job): Promise<void> {
  await db.query(`INSERT INTO lifo_runs (queue, job_id) VALUES ($1, $2)`, [job.queue, job.id]);
}

@Injectable()
class Handlers {
  @JobHandler('fifo-plain', { concurrency: 1, ...QUEUES['fifo-plain'].options }) async a(job: Job) { await record(job); }
  @JobHandler('lifo-plain', { concurrency: 1, ...QUEUES['lifo-plain'].options }) async b(job: Job) { await record(job); }
  @JobHandler('lifo-prefetch', { concurrency: 1, ...QUEUES['lifo-prefetch'].options }) async c(job: Job) { await record(job); }
  @JobHandler('lifo-auto', { concurrency: 1, ...QUEUES['lifo-auto'].options }) async d(job: Job) { await record(job); }
  @JobHandler('lifo-global', { concurrency: 1, ...QUEUES['lifo-global'].options }) async e(job: Job) { await record(job); }
  @JobHandler('fifo-keyed', { concurrency: 1, ...QUEUES['fifo-keyed'].options }) async n(job: Job) { await record(job); }
  @JobHandler('fifo-fair', { concurrency: 1, ...QUEUES['fifo-fair'].options }) async o(job: Job) { await record(job); }
  @JobHandler('fifo-fair-plain', { concurrency: 1, ...QUEUES['fifo-fair-plain'].options }) async p(job: Job) { await record(job); }
  @JobHandler('lifo-keyed', { concurrency: 1, ...QUEUES['lifo-keyed'].options }) async f(job: Job) { await record(job); }
  @JobHandler('lifo-fair', { concurrency: 1, ...QUEUES['lifo-fair'].options }) async g(job: Job) { await record(job); }
  @JobHandler('mixed-plain', { concurrency: 1, ...QUEUES['mixed-plain'].options }) async h(job: Job) { await record(job); }
  @JobHandler('mixed-prefetch', { concurrency: 1, ...QUEUES['mixed-prefetch'].options }) async i(job: Job) { await record(job); }
  @JobHandler('mixed-auto', { concurrency: 1, ...QUEUES['mixed-auto'].options }) async j(job: Job) { await record(job); }
  @JobHandler('mixed-global', { concurrency: 1, ...QUEUES['mixed-global'].options }) async k(job: Job) { await record(job); }
  @JobHandler('mixed-keyed', { concurrency: 1, ...QUEUES['mixed-keyed'].options }) async l(job: Job) { await record(job); }
  @JobHandler('mixed-fair', { concurrency: 1, ...QUEUES['mixed-fair'].options }) async m(job: Job) { await record(job); }
}

describe('LIFO', () => {
  const ctx = useTestApp('lifo', { providers: [Handlers], queue: { maintenance: { enabled: false } } }, async (pool) => {
    db = pool;
    await pool.query(`CREATE TABLE lifo_runs (seq bigserial PRIMARY KEY, queue text NOT NULL, job_id bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`);
  });

  interface Row {
    id: string;
    priority: number;
    lifo: boolean | null;
    run_at: Date;
  }

  /** The order the rows say the jobs start in: by priority, then LIFO jobs newest first, then FIFO jobs oldest first. */
  function expectedOrder(rows: Row[], queueLifo: boolean): string[] {
    const newer = (a: Row, b: Row) => b.run_at.getTime() - a.run_at.getTime() || Number(BigInt(b.id) - BigInt(a.id));
    return [...rows]
      .sort((a, b) => {
        if (a.priority !== b.priority) return b.priority - a.priority;
        if (queueLifo) return newer(a, b);
        const la = a.lifo === true;
        const lb = b.lifo === true;
        if (la !== lb) return la ? -1 : 1;
        return la ? newer(a, b) : -newer(a, b);
      })
      .map((r) => r.id);
  }

  /** Pauses `name`, enqueues `n` jobs one after the other (priorities and LIFO flags alternating), resumes, and returns the start order and the expected one. */
  async function runQueue(name: string, n = 12): Promise<{ started: string[]; expected: string[]; rows: Row[]; returned: Set<string> }> {
    const queue = ctx.app.get(QueueService);
    const spec = QUEUES[name];
    const priorities = spec.priorities ?? [0, 5];
    await queue.pause(name);
    // The event stream says which jobs a worker gave back before they started (`returned`), read below.
    await queue.recordEvents(name);
    for (let i = 0; i < n; i++) {
      await queue.enqueue(name, { i }, {
        priority: priorities[i % priorities.length],
        ...(spec.perJob ? { lifo: i % 3 !== 2 } : {}),
        ...(spec.keyed ? { concurrencyKey: 'tenant-1' } : {}),
      });
    }
    // Per job: the first LIFO enqueue marked the queue; every worker has read its row by the next re-read (500 ms).
    if (spec.perJob) expect((await db.query(`SELECT lifo_jobs FROM background_queues WHERE queue_name = $1`, [name])).rows).toEqual([{ lifo_jobs: true }]);
    // A claim the enqueues woke (it takes nothing while the queue is paused) may still be in flight: the resume's claim
    // must be the first to see the queue open. (A claim's clock is its transaction's start: a job enqueued after that is
    // not yet due for it, whatever its snapshot sees. One sent before the resume and answered after it could take the
    // second newest job of the queue first, LIFO or not.) And every worker has read the queue's row by then (500 ms).
    await new Promise((r) => setTimeout(r, spec.perJob ? 700 : 200));
    await queue.resume(name);
    await waitFor(`${name}: every job completed`, async () => {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = $1 AND status = 'completed'`, [name]);
      return rows[0].n === n;
    });
    const started = (await db.query<{ job_id: string }>(`SELECT job_id::text FROM lifo_runs WHERE queue = $1 AND job_id > 0 ORDER BY seq`, [name])).rows.map((r) => r.job_id);
    const rows = (await db.query<Row>(`SELECT id::text, priority, lifo, run_at FROM background_jobs WHERE queue_name = $1`, [name])).rows;
    // A buffered job given back (past its start deadline, 2.5 s after its claim, on a loaded machine: CI 2026-12-07)
    // goes back to the queue, behind the jobs the buffer holds, and runs again as claimed later (README: read-ahead).
    // The order is then asserted for every other job; a run without give-backs (nearly every one) asserts it whole.
    const returned = new Set(
      (await db.query<{ job_id: string }>(`SELECT DISTINCT job_id::text FROM background_job_events WHERE queue_name = $1 AND type = 'returned'`, [name])).rows.map((r) => r.job_id),
    );
    if (returned.size) console.log(`${name}: given back before they started, so not in the order asserted: ${[...returned].join(', ')}`);
    expect(new Set(started).size).toBe(n);
    const kept = (ids: string[]) => ids.filter((id) => !returned.has(id));
    return { started: kept(started), expected: kept(expectedOrder(rows, spec.options.lifo === true)), rows, returned };
  }

  it('a FIFO queue without LIFO jobs starts them oldest first within each priority (the plain claim, as before)', async () => {
    const { started, rows } = await runQueue('fifo-plain');
    const fifo = [...rows].sort((a, b) => b.priority - a.priority || a.run_at.getTime() - b.run_at.getTime() || Number(BigInt(a.id) - BigInt(b.id))).map((r) => r.id);
    expect(started).toEqual(fifo);
    expect(rows.every((r) => r.lifo === null)).toBe(true);
    expect((await db.query(`SELECT lifo_jobs FROM background_queues WHERE queue_name = 'fifo-plain'`)).rows).toEqual([{ lifo_jobs: null }]);
  });

  it.each(['fifo-keyed', 'fifo-fair', 'fifo-fair-plain'])(
    '%s (one key, priorities 5, 0 and -3): the key starts its jobs highest priority first, oldest first within each',
    async (name) => {
      const { started, expected, rows } = await runQueue(name);
      expect(started).toEqual(expected);
      expect(new Set(rows.map((r) => r.priority))).toEqual(new Set([5, 0, -3]));
    },
  );

  it.each(['lifo-plain', 'lifo-prefetch', 'lifo-auto', 'lifo-global', 'lifo-keyed', 'lifo-fair'])(
    '%s (lifo: true on the handler): newest first within each priority, resumed with concurrency 1',
    async (name) => {
      const { started, expected, rows, returned } = await runQueue(name);
      expect(started).toEqual(expected);
      // Within one priority the start order is the reverse of the enqueue order.
      const p0 = rows.filter((r) => r.priority === 0 && !returned.has(r.id)).map((r) => r.id);
      expect(started.filter((id) => p0.includes(id))).toEqual([...p0].sort((a, b) => Number(BigInt(b) - BigInt(a))));
    },
  );

  it.each(['mixed-plain', 'mixed-prefetch', 'mixed-auto', 'mixed-global', 'mixed-keyed', 'mixed-fair'])(
    '%s (lifo: true on some jobs): their LIFO jobs first, newest first, then the FIFO ones oldest first, within each priority',
    async (name) => {
      const { started, expected, rows } = await runQueue(name);
      expect(started).toEqual(expected);
      expect(rows.filter((r) => r.lifo === true).length).toBe(8);
      expect(rows.filter((r) => r.lifo === null).length).toBe(4);
    },
  );

  it("get() and the job's row say lifo; a LIFO enqueue never starts eagerly (its row says LIFO first)", async () => {
    const queue = ctx.app.get(QueueService);
    const id = await queue.enqueue('mixed-plain', { x: 1 }, { lifo: true, delayMs: 60_000 });
    expect(await queue.get(id)).toMatchObject({ lifo: true, successorId: null, waitsForId: null });
    const [plain] = await queue.enqueueMany([{ queue: 'mixed-plain', payload: { x: 2 }, delayMs: 60_000 }]);
    expect(await queue.get(plain)).toMatchObject({ lifo: false });
    await expect(queue.enqueue('mixed-plain', {}, { lifo: 'yes' as never })).rejects.toThrow(`Invalid enqueue("mixed-plain") option lifo="yes": expected true or false.`);
    await queue.cancel(id);
    await queue.cancel(plain);
  });

  it('enqueue from SQL takes lifo (pg_queue_enqueue, pg_queue_enqueue_many) and marks the queue', async () => {
    const { rows } = await db.query<{ id: string }>(`SELECT pg_queue_enqueue('sql-lifo', '{"a": 1}', lifo => true, delay_ms => 60000)::text AS id`);
    expect((await db.query(`SELECT lifo FROM background_jobs WHERE id = $1`, [rows[0].id])).rows).toEqual([{ lifo: true }]);
    expect((await db.query(`SELECT lifo_jobs FROM background_queues WHERE queue_name = 'sql-lifo'`)).rows).toEqual([{ lifo_jobs: true }]);
    const many = await db.query<{ id: string }>(`SELECT id::text FROM pg_queue_enqueue_many('[{"queue": "sql-lifo2", "payload": 1, "lifo": false}, {"queue": "sql-lifo2", "payload": 2, "lifo": true}]')`);
    expect((await db.query(`SELECT lifo FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id`, [many.rows.map((r) => r.id)])).rows).toEqual([{ lifo: null }, { lifo: true }]);
    await expect(db.query(`SELECT pg_queue_enqueue_many('[{"queue": "sql-lifo2", "payload": 1, "lifo": "yes"}]')`)).rejects.toThrow(
      'pg_queue_enqueue_many: job #0: Invalid pg_queue_enqueue("sql-lifo2") option lifo="yes": expected true or false.',
    );
  });
});
