import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { JobHandler, QueueService, type EnqueueOptions, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// The SQL functions of migration SqlEnqueue1764640000000 (docs/guides/sql-enqueue.md): the same jobs as QueueService's
// enqueues, the same unique keys (shared with Node producers), called from triggers, rolled back with their transaction.

const ran: { queue: string; payload: unknown }[] = [];

@Injectable()
class Handlers {
  @JobHandler('welcome')
  async welcome(job: Job) {
    ran.push({ queue: 'welcome', payload: job.payload });
  }

  @JobHandler('order-confirmation')
  async confirm(job: Job) {
    ran.push({ queue: 'order-confirmation', payload: job.payload });
  }

  @JobHandler('shop-mail')
  async shopMail(job: Job) {
    ran.push({ queue: 'shop-mail', payload: job.payload });
  }
}

describe('enqueue from SQL: pg_queue_enqueue, pg_queue_enqueue_unique, pg_queue_enqueue_many', () => {
  let url: string;
  let app: INestApplicationContext;
  let queue: QueueService;
  let db: pg.Pool;

  beforeAll(async () => {
    url = await createTestDatabase('sql_enqueue');
    db = sqlPool(url);
    app = await startApp(url, { providers: [Handlers], queue: { maintenance: { enabled: false } } });
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  const one = async <T = Record<string, unknown>>(text: string, values: unknown[] = []) => (await db.query(text, values)).rows[0] as T;
  const all = async <T = Record<string, unknown>>(text: string, values: unknown[] = []) => (await db.query(text, values)).rows as T[];
  /** A job as its row holds it, its run_at as ms after its created_at (the delay) and as an instant. */
  const job = (id: string) =>
    one(
      `SELECT queue_name, payload, status::text, priority, max_attempts, unique_key, concurrency_key, trace_context, attempts,
              (extract(epoch FROM run_at - created_at) * 1000)::int8::text AS delay_ms, run_at
       FROM background_jobs WHERE id = $1`,
      [id],
    );
  const jobsOf = (queueName: string) => all(`SELECT id::text, payload, unique_key FROM background_jobs WHERE queue_name = $1 ORDER BY id`, [queueName]);
  const enqueueSql = async (call: string, values: unknown[] = []) => (await one<{ id: string }>(`SELECT ${call}::text AS id`, values)).id;
  /** Waits until `n` jobs of the queue are completed (the handler ran, and its completion committed after it). */
  const completed = (queueName: string, n: number) =>
    waitFor(`${n} completed job(s) of ${queueName}`, async () => (await one<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = $1 AND status = 'completed'`, [queueName])).n === n);
  const outcomes = (call: string, values: unknown[] = []) => all<{ id: string; duplicate: boolean; replaced: boolean }>(`SELECT id::text, duplicate, replaced FROM ${call}`, values);

  describe('the same jobs as QueueService.enqueue', () => {
    const cases: [title: string, sqlCall: string, payload: unknown, options: EnqueueOptions][] = [
      ['the defaults', `pg_queue_enqueue('same', '{"to":"a"}')`, { to: 'a' }, {}],
      ['priority', `pg_queue_enqueue('same', '{"n":1}', priority => 7)`, { n: 1 }, { priority: 7 }],
      ['a negative priority', `pg_queue_enqueue('same', '{"n":2}', priority => -3)`, { n: 2 }, { priority: -3 }],
      ['max_attempts', `pg_queue_enqueue('same', '{"n":3}', max_attempts => 2)`, { n: 3 }, { maxAttempts: 2 }],
      ['delay_ms', `pg_queue_enqueue('same', '{"n":4}', delay_ms => 5000)`, { n: 4 }, { delayMs: 5_000 }],
      ['run_at', `pg_queue_enqueue('same', '{"n":5}', run_at => '2030-01-02T03:04:05.678Z')`, { n: 5 }, { runAt: new Date('2030-01-02T03:04:05.678Z') }],
      ['concurrency_key', `pg_queue_enqueue('same', '{"n":6}', concurrency_key => 'tenant-1')`, { n: 6 }, { concurrencyKey: 'tenant-1' }],
      ['a JSON null payload', `pg_queue_enqueue('same', 'null')`, null, {}],
      ['an array payload', `pg_queue_enqueue('same', '[1,"two",{"three":3}]')`, [1, 'two', { three: 3 }], {}],
      ['a unique key', `pg_queue_enqueue('same', '{"n":7}', unique_key => 'same-k')`, { n: 7 }, { uniqueKey: 'same-k' }],
    ];
    it.each(cases)('%s', async (_title, sqlCall, payload, options) => {
      const fromSql = await enqueueSql(sqlCall);
      const sqlRow = await job(fromSql);
      // The Node job after the SQL one's key is freed (a unique key allows one queued job).
      await db.query(`UPDATE background_jobs SET status = 'completed', finished_at = now() WHERE id = $1`, [fromSql]);
      const fromNode = await queue.enqueue('same', payload, options);
      expect(fromNode).not.toBe(fromSql);
      // run_at compared as the delay after created_at (each job's own now()), and as an instant when one was given.
      const { run_at: sqlRunAt, delay_ms: sqlDelay, ...sqlRest } = sqlRow;
      const { run_at: nodeRunAt, delay_ms: nodeDelay, ...nodeRest } = await job(fromNode);
      expect(sqlRest).toEqual({ ...nodeRest, status: 'queued' });
      if (options.runAt) expect([sqlRunAt, nodeRunAt]).toEqual([options.runAt, options.runAt]);
      else expect(sqlDelay).toBe(nodeDelay);
    });

    it('the payload defaults to {}; trace_context is stored as given', async () => {
      const id = await enqueueSql(`pg_queue_enqueue('same')`);
      expect(await job(id)).toMatchObject({ payload: {}, priority: 0, max_attempts: 5, delay_ms: '0', trace_context: null });
      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const traced = await enqueueSql(`pg_queue_enqueue('same', '{}', trace_context => jsonb_build_object('traceparent', $1::text))`, [traceparent]);
      expect(await job(traced)).toMatchObject({ trace_context: { traceparent } });
    });

    it('named parameters in any order, with their defaults', async () => {
      const id = await enqueueSql(`pg_queue_enqueue(queue => 'named', payload => '{}', delay_ms => 5000, unique_key => 'k', on_conflict => 'replace')`);
      expect(await job(id)).toMatchObject({ queue_name: 'named', payload: {}, unique_key: 'k', delay_ms: '5000', priority: 0, max_attempts: 5 });
      const again = await enqueueSql(`pg_queue_enqueue(on_conflict => 'replace', unique_key => 'k', payload => '{"v":2}', queue => 'named')`);
      expect(again).toBe(id);
      // Replaced: the new payload, and run_at now (no delay given).
      expect(await one(`SELECT payload, run_at <= now() AS due FROM background_jobs WHERE id = $1`, [id])).toEqual({ payload: { v: 2 }, due: true });
    });
  });

  describe('unique keys shared with Node producers', () => {
    it('keep: a key held by a Node job is a duplicate from SQL, and the reverse', async () => {
      const fromNode = await queue.enqueueUnique('u-keep', { v: 1 }, { uniqueKey: 'k', delayMs: 60_000 });
      expect(await outcomes(`pg_queue_enqueue_unique('u-keep', '{"v":2}', unique_key => 'k')`)).toEqual([{ id: fromNode.id, duplicate: true, replaced: false }]);
      expect(await enqueueSql(`pg_queue_enqueue('u-keep', '{"v":3}', unique_key => 'k')`)).toBe(fromNode.id);

      const [fromSql] = await outcomes(`pg_queue_enqueue_unique('u-keep', '{"v":1}', unique_key => 'k2', delay_ms => 60000)`);
      expect(fromSql).toEqual({ id: expect.stringMatching(/^\d+$/), duplicate: false, replaced: false });
      expect(await queue.enqueueUnique('u-keep', { v: 2 }, { uniqueKey: 'k2' })).toEqual({ id: fromSql.id, duplicate: true, replaced: false });
      expect(await jobsOf('u-keep')).toEqual([
        { id: fromNode.id, payload: { v: 1 }, unique_key: 'k' },
        { id: fromSql.id, payload: { v: 1 }, unique_key: 'k2' },
      ]);
    });

    it("replace from SQL gives a queued Node job the new payload and run_at; keep-run-at keeps its run_at", async () => {
      const held = await queue.enqueueUnique('u-replace', { v: 1 }, { uniqueKey: 'r', delayMs: 60_000 });
      const before = await job(held.id);
      expect(await outcomes(`pg_queue_enqueue_unique('u-replace', '{"v":2}', unique_key => 'r', on_conflict => 'replace', delay_ms => 3600000)`)).toEqual([
        { id: held.id, duplicate: true, replaced: true },
      ]);
      const after = await job(held.id);
      expect(after).toMatchObject({ payload: { v: 2 }, status: 'queued' });
      expect((after.run_at as Date).getTime() - (before.run_at as Date).getTime()).toBeGreaterThan(3_000_000);

      const throttled = await queue.enqueueUnique('u-throttle', { v: 1 }, { uniqueKey: 't', delayMs: 60_000 });
      const runAt = (await job(throttled.id)).run_at;
      expect(await outcomes(`pg_queue_enqueue_unique('u-throttle', '{"v":2}', unique_key => 't', on_conflict => 'keep-run-at', delay_ms => 3600000)`)).toEqual([
        { id: throttled.id, duplicate: true, replaced: true },
      ]);
      expect(await job(throttled.id)).toMatchObject({ payload: { v: 2 }, run_at: runAt });
      // And Node replaces a job SQL enqueued.
      expect(await queue.enqueueUnique('u-throttle', { v: 3 }, { uniqueKey: 't', onConflict: 'replace' })).toEqual({ id: throttled.id, duplicate: true, replaced: true });
      expect(await job(throttled.id)).toMatchObject({ payload: { v: 3 }, delay_ms: expect.not.stringMatching(/^0$/) });
      expect(await jobsOf('u-throttle')).toHaveLength(1);
    });

    it('a running holder is never replaced; a read-ahead one is, and goes back queued; a finished one frees the key', async () => {
      const holder = await queue.enqueueUnique('u-running', { v: 1 }, { uniqueKey: 'r' });
      await db.query(`UPDATE background_jobs SET status = 'processing', locked_by = 'w1', buffered = false WHERE id = $1`, [holder.id]);
      for (const mode of ['keep', 'replace', 'keep-run-at']) {
        expect(await outcomes(`pg_queue_enqueue_unique('u-running', '{"v":2}', unique_key => 'r', on_conflict => $1)`, [mode])).toEqual([
          { id: holder.id, duplicate: true, replaced: false },
        ]);
      }
      expect(await job(holder.id)).toMatchObject({ status: 'processing', payload: { v: 1 } });

      await db.query(`UPDATE background_jobs SET buffered = true WHERE id = $1`, [holder.id]);
      const listener = new pg.Client({ connectionString: url });
      await listener.connect();
      try {
        const heard: string[] = [];
        listener.on('notification', (n) => heard.push(`${n.channel}:${n.payload}`));
        await listener.query('LISTEN pg_queue_review');
        await listener.query('LISTEN pg_queue_jobs');
        expect(await outcomes(`pg_queue_enqueue_unique('u-running', '{"v":3}', unique_key => 'r', on_conflict => 'replace')`)).toEqual([
          { id: holder.id, duplicate: true, replaced: true },
        ]);
        expect(await job(holder.id)).toMatchObject({ status: 'queued', payload: { v: 3 } });
        expect(await one(`SELECT buffered, lease_expires_at FROM background_jobs WHERE id = $1`, [holder.id])).toEqual({ buffered: false, lease_expires_at: null });
        await waitFor('the review and wake notices', async () => heard.includes('pg_queue_review:u-running') && heard.includes('pg_queue_jobs:u-running'));
      } finally {
        await listener.end();
      }

      await db.query(`UPDATE background_jobs SET status = 'completed', finished_at = now() WHERE id = $1`, [holder.id]);
      const [next] = await outcomes(`pg_queue_enqueue_unique('u-running', '{"v":4}', unique_key => 'r')`);
      expect(next).toEqual({ id: expect.not.stringMatching(`^${holder.id}$`), duplicate: false, replaced: false });
    });

    it('a key enqueued by a transaction still open: the call waits for it; committed, the call is its duplicate (and replaces it); rolled back, the call adds the job', async () => {
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      try {
        for (const end of ['COMMIT', 'ROLLBACK'] as const) {
          const key = `open-${end}`;
          await holder.query('BEGIN');
          const held = (await holder.query(`SELECT pg_queue_enqueue('u-open', '{"v":1}', unique_key => $1, delay_ms => 60000)::text AS id`, [key])).rows[0].id as string;
          let settled = false;
          // The holder's row is invisible to the call's first snapshot: its insert waits, then finds the conflict and
          // goes again with the next statement's snapshot.
          const call = outcomes(`pg_queue_enqueue_unique('u-open', '{"v":2}', unique_key => $1, on_conflict => 'replace')`, [key]).finally(() => (settled = true));
          await waitFor('the call waiting on the open insert', async () => (await one<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%u-open%'`)).n === 1);
          expect(settled).toBe(false);
          await holder.query(end);
          const [result] = await call;
          const rows = await all(`SELECT id::text, payload FROM background_jobs WHERE queue_name = 'u-open' AND unique_key = $1`, [key]);
          if (end === 'COMMIT') {
            expect(result).toEqual({ id: held, duplicate: true, replaced: true });
            expect(rows).toEqual([{ id: held, payload: { v: 2 } }]);
          } else {
            expect(result).toEqual({ id: expect.not.stringMatching(`^${held}$`), duplicate: false, replaced: false });
            expect(rows).toEqual([{ id: result.id, payload: { v: 2 } }]);
          }
        }
      } finally {
        await holder.end();
      }
    });

    it('window keys (unique_for_ms): a Node window is a duplicate from SQL, even once its job is gone, and the reverse', async () => {
      const windowed = await queue.enqueueUnique('u-window', { v: 1 }, { uniqueKey: 'w', uniqueForMs: 3_600_000, delayMs: 60_000 });
      expect(await outcomes(`pg_queue_enqueue_unique('u-window', '{"v":2}', unique_key => 'w', unique_for_ms => 3600000)`)).toEqual([
        { id: windowed.id, duplicate: true, replaced: false },
      ]);
      await db.query(`DELETE FROM background_jobs WHERE id = $1`, [windowed.id]);
      expect(await enqueueSql(`pg_queue_enqueue('u-window', '{"v":3}', unique_key => 'w', unique_for_ms => 60000)`)).toBe(windowed.id);
      expect(await all(`SELECT unique_key, job_id::text FROM background_job_keys WHERE queue_name = 'u-window'`)).toEqual([{ unique_key: 'w', job_id: windowed.id }]);
      // A live key of the same string is another key.
      const [live] = await outcomes(`pg_queue_enqueue_unique('u-window', '{"v":4}', unique_key => 'w')`);
      expect(live.duplicate).toBe(false);

      const [fromSql] = await outcomes(`pg_queue_enqueue_unique('u-window', '{"v":5}', unique_key => 'w2', unique_for_ms => 3600000)`);
      expect(fromSql.duplicate).toBe(false);
      expect(await queue.enqueueUnique('u-window', { v: 6 }, { uniqueKey: 'w2', uniqueForMs: 60_000 })).toEqual({ id: fromSql.id, duplicate: true, replaced: false });
      // The window ended: the next enqueue takes the key again.
      await db.query(`UPDATE background_job_keys SET held_until = now() - interval '1 second' WHERE queue_name = 'u-window' AND unique_key = 'w2'`);
      const [after] = await outcomes(`pg_queue_enqueue_unique('u-window', '{"v":7}', unique_key => 'w2', unique_for_ms => 3600000)`);
      expect(after.duplicate).toBe(false);
      expect(await one(`SELECT job_id::text FROM background_job_keys WHERE queue_name = 'u-window' AND unique_key = 'w2'`)).toEqual({ job_id: after.id });
      expect((await jobsOf('u-window')).map((j) => j.payload)).toEqual([{ v: 4 }, { v: 5 }, { v: 7 }]);
    });
  });

  describe('pg_queue_enqueue_many', () => {
    it('one row per job in input order, as enqueueManyUnique: jobs of one key fold as if enqueued one after the other', async () => {
      const specs = (q: string) => [
        { queue: q, payload: { n: 1 } },
        { queue: q, payload: { n: 2 }, unique_key: 'a', delay_ms: 60_000 },
        { queue: q, payload: { n: 3 }, unique_key: 'a', on_conflict: 'replace', delay_ms: 120_000 },
        { queue: q, payload: { n: 4 }, unique_key: 'a', on_conflict: 'keep-run-at' },
        { queue: q, payload: { n: 5 }, unique_key: 'a' },
        { queue: q, payload: { n: 6 }, unique_key: 'w', unique_for_ms: 60_000 },
        { queue: q, payload: { n: 7 }, unique_key: 'w', unique_for_ms: 60_000 },
        { queue: q, payload: { n: 8 }, priority: 3, max_attempts: 2, concurrency_key: 'c' },
      ];
      const fromSql = await outcomes(`pg_queue_enqueue_many($1::jsonb)`, [JSON.stringify(specs('many-sql'))]);
      const fromNode = await queue.enqueueManyUnique(
        specs('many-node').map(({ queue: q, payload, unique_key, on_conflict, delay_ms, unique_for_ms, priority, max_attempts, concurrency_key }) => ({
          queue: q, payload, uniqueKey: unique_key, onConflict: on_conflict as EnqueueOptions['onConflict'], delayMs: delay_ms, uniqueForMs: unique_for_ms,
          priority, maxAttempts: max_attempts, concurrencyKey: concurrency_key,
        })),
      );
      const shape = (results: { id: string; duplicate: boolean; replaced: boolean }[]) => results.map((r) => ({ at: results.findIndex((s) => s.id === r.id), duplicate: r.duplicate, replaced: r.replaced }));
      expect(shape(fromSql)).toEqual(shape(fromNode));
      expect(shape(fromSql)).toEqual([
        { at: 0, duplicate: false, replaced: false },
        { at: 1, duplicate: false, replaced: false },
        { at: 1, duplicate: true, replaced: true },
        { at: 1, duplicate: true, replaced: true },
        { at: 1, duplicate: true, replaced: false },
        { at: 5, duplicate: false, replaced: false },
        { at: 5, duplicate: true, replaced: false },
        { at: 7, duplicate: false, replaced: false },
      ]);
      const rows = async (q: string) =>
        all(`SELECT payload, unique_key, priority, max_attempts, concurrency_key, (extract(epoch FROM run_at - created_at) * 1000)::int AS delay FROM background_jobs WHERE queue_name = $1 ORDER BY id`, [q]);
      expect(await rows('many-sql')).toEqual(await rows('many-node'));
      // The key's job: the payload of the last job that brings one (keep-run-at), the run_at of the last 'replace'.
      expect((await rows('many-sql'))[1]).toMatchObject({ payload: { n: 4 }, unique_key: 'a', delay: 120_000 });
    });

    it('jobs without keys: one insert, ids ascending in input order; an empty array adds nothing', async () => {
      const results = await outcomes(`pg_queue_enqueue_many($1::jsonb)`, [JSON.stringify([1, 2, 3, 4, 5].map((n) => ({ queue: 'many-plain', payload: { n } })))]);
      expect(results.map((r) => r.duplicate || r.replaced)).toEqual([false, false, false, false, false]);
      const ids = results.map((r) => BigInt(r.id));
      expect([...ids].sort((a, b) => (a < b ? -1 : 1))).toEqual(ids);
      expect(await jobsOf('many-plain')).toEqual(results.map((r, i) => ({ id: r.id, payload: { n: i + 1 }, unique_key: null })));
      expect(await outcomes(`pg_queue_enqueue_many('[]')`)).toEqual([]);
    });
  });

  describe('concurrent producers from SQL and Node on the same keys', () => {
    let clients: pg.Client[];
    beforeAll(async () => {
      clients = await Promise.all(
        [0, 1, 2].map(async () => {
          const client = new pg.Client({ connectionString: url });
          await client.connect();
          return client;
        }),
      );
    });
    afterAll(async () => {
      await Promise.all(clients.map((c) => c.end()));
    });

    // Each call names the same keys in its own order (the lock-order test of unique-jobs.spec, with SQL callers):
    // 3 SQL connections and 2 Node calls at once, every mode and the modes mixed.
    const ROUNDS = Number(process.env.PG_QUEUE_ORDER_ROUNDS ?? 40);
    it(`5 producers (3 SQL, 2 Node) x ${ROUNDS} rounds of 10 keys, each in its own order: no deadlock, one job per key`, async () => {
      const modes = [{ on_conflict: 'keep' }, { on_conflict: 'replace' }, { on_conflict: 'keep-run-at' }, { unique_for_ms: 3_600_000 }, 'mixed'] as const;
      const mixed = ['keep', 'replace', 'keep-run-at', 'replace', 'keep-run-at'] as const;
      const errors: string[] = [];
      const named = { k: new Set<string>(), w: new Set<string>() };
      for (let round = 0; round < ROUNDS; round++) {
        const mode = modes[round % modes.length];
        const prefix = typeof mode === 'object' && 'unique_for_ms' in mode ? 'w' : 'k';
        // 5 new keys, and the 5 of this mode's last round, whose holders are queued: 'replace' and 'keep-run-at' lock them.
        const keys = [0, 1, 2, 3, 4].flatMap((k) => [`${prefix}${round}-${k}`, `${prefix}${round - modes.length}-${k}`]);
        for (const key of keys) named[prefix].add(key);
        await Promise.all(
          [0, 1, 2, 3, 4].map(async (p) => {
            const mine = keys.map((_, i) => keys[(i * [1, 3, 7, 9, 3][p] + p) % keys.length]); // a permutation per producer
            const options = mode === 'mixed' ? { on_conflict: mixed[p] } : mode;
            try {
              if (p < 3) {
                const jobs = mine.map((unique_key) => ({ queue: 'race', payload: { p, round }, unique_key, delay_ms: 3_600_000, ...options }));
                await clients[p].query(`SELECT count(*) FROM pg_queue_enqueue_many($1::jsonb)`, [JSON.stringify(jobs)]);
              } else {
                const node = 'unique_for_ms' in options ? { uniqueForMs: options.unique_for_ms } : { onConflict: options.on_conflict };
                await queue.enqueueManyUnique(mine.map((uniqueKey) => ({ queue: 'race', payload: { p, round }, uniqueKey, delayMs: 3_600_000, ...node })));
              }
            } catch (error) {
              errors.push(`round ${round}, producer ${p}: ${(error as Error).message}`);
            }
          }),
        );
      }
      expect(errors).toEqual([]);
      expect(await one(`SELECT count(*)::int AS n, count(DISTINCT unique_key)::int AS keys FROM background_jobs WHERE queue_name = 'race' AND unique_key IS NOT NULL`)).toEqual({
        n: named.k.size,
        keys: named.k.size,
      });
      expect(await one(`SELECT count(*)::int AS n FROM background_job_keys WHERE queue_name = 'race'`)).toEqual({ n: named.w.size });
    });

    it('3 SQL and 2 Node producers x 60 single enqueues on 8 keys, modes mixed: every call learns the one job of its key', async () => {
      const modes = ['keep', 'replace', 'keep-run-at'] as const;
      const seen = await Promise.all(
        [0, 1, 2, 3, 4].map(async (p) => {
          const got: { key: string; id: string }[] = [];
          for (let i = 0; i < 60; i++) {
            const key = `s${(i * 5 + p * 3) % 8}`;
            const onConflict = modes[(i + p) % 3];
            const id =
              p < 3
                ? (await clients[p].query(`SELECT id::text FROM pg_queue_enqueue_unique('race-one', $1::jsonb, unique_key => $2, on_conflict => $3, delay_ms => 3600000)`, [JSON.stringify({ p, i }), key, onConflict])).rows[0].id
                : (await queue.enqueueUnique('race-one', { p, i }, { uniqueKey: key, onConflict, delayMs: 3_600_000 })).id;
            got.push({ key, id });
          }
          return got;
        }),
      );
      const rows = await jobsOf('race-one');
      expect(rows).toHaveLength(8);
      const idOf = new Map(rows.map((r) => [r.unique_key as string, r.id as string]));
      for (const { key, id } of seen.flat()) expect(id).toBe(idOf.get(key));
    });
  });

  describe('from a trigger, in the caller’s transaction', () => {
    beforeAll(async () => {
      await db.query(`
        CREATE TABLE signups (id serial PRIMARY KEY, email text NOT NULL);
        CREATE FUNCTION signup_welcome() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_queue_enqueue('welcome', jsonb_build_object('email', NEW.email), unique_key => 'signup:' || NEW.id);
          RETURN NULL;
        END $$;
        CREATE TRIGGER signup_welcome AFTER INSERT ON signups FOR EACH ROW EXECUTE FUNCTION signup_welcome();
        -- The statement trigger of docs/guides/sql-enqueue.md: every inserted row in one pg_queue_enqueue_many.
        CREATE TABLE orders (id serial PRIMARY KEY);
        CREATE FUNCTION orders_confirm() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM count(*) FROM pg_queue_enqueue_many(coalesce((
            SELECT jsonb_agg(jsonb_build_object('queue', 'order-confirmation', 'payload', jsonb_build_object('order', o.id),
                                                'unique_key', 'order:' || o.id) ORDER BY o.id)
            FROM new_orders AS o), '[]'));
          RETURN NULL;
        END $$;
        CREATE TRIGGER orders_confirm AFTER INSERT ON orders
          REFERENCING NEW TABLE AS new_orders FOR EACH STATEMENT EXECUTE FUNCTION orders_confirm();
        -- Another schema's table, whose callers' search_path does not name the queue's schema.
        CREATE SCHEMA shop;
        CREATE TABLE shop.orders (id serial PRIMARY KEY, email text NOT NULL);
        CREATE FUNCTION shop.order_mail() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM public.pg_queue_enqueue(queue => 'shop-mail', payload => jsonb_build_object('order', NEW.id), priority => 5);
          RETURN NULL;
        END $$;
        CREATE TRIGGER order_mail AFTER INSERT ON shop.orders FOR EACH ROW EXECUTE FUNCTION shop.order_mail();`);
    });
    beforeEach(() => {
      ran.length = 0;
    });

    it('a row inserted into an app table enqueues a job that a worker runs; the wake-up is sent at commit', async () => {
      await watchingWakeUps(url, async (writer, heard) => {
        await writer.query('BEGIN');
        const { rows } = await writer.query(`INSERT INTO signups (email) VALUES ('ada@example.com'), ('bob@example.com') RETURNING id`);
        // Nothing before the commit, nothing a worker could not see yet: a notice committed since has arrived alone.
        expect(await heardBefore(db, heard)).toEqual([]);
        await writer.query('COMMIT');
        await waitFor('the wake-up', async () => heard.includes('pg_queue_jobs:welcome'));
        await completed('welcome', 2);
        expect(ran.map((r) => r.payload)).toEqual(expect.arrayContaining([{ email: 'ada@example.com' }, { email: 'bob@example.com' }]));
        expect(await all(`SELECT unique_key, status::text FROM background_jobs WHERE queue_name = 'welcome' ORDER BY id`)).toEqual(
          rows.map((r) => ({ unique_key: `signup:${r.id}`, status: 'completed' })),
        );
      });
    });

    it('a statement trigger: every row of a multi-row INSERT in one pg_queue_enqueue_many; an INSERT of no rows enqueues nothing', async () => {
      await db.query(`INSERT INTO orders SELECT FROM generate_series(1, 3)`);
      await db.query(`INSERT INTO orders SELECT FROM generate_series(1, 0)`);
      await completed('order-confirmation', 3);
      expect(ran.map((r) => r.payload)).toEqual(expect.arrayContaining([{ order: 1 }, { order: 2 }, { order: 3 }]));
      expect(await all(`SELECT unique_key, status::text FROM background_jobs WHERE queue_name = 'order-confirmation' ORDER BY id`)).toEqual(
        [1, 2, 3].map((id) => ({ unique_key: `order:${id}`, status: 'completed' })),
      );
    });

    it('from a table of another schema, with a search_path that does not name the queue’s', async () => {
      const writer = new pg.Client({ connectionString: url, options: '-c search_path=shop' });
      await writer.connect();
      try {
        await writer.query(`INSERT INTO orders (email) VALUES ('c@example.com')`);
      } finally {
        await writer.end();
      }
      await completed('shop-mail', 1);
      expect(ran).toEqual([{ queue: 'shop-mail', payload: { order: 1 } }]);
      expect(await all(`SELECT priority, status::text FROM public.background_jobs WHERE queue_name = 'shop-mail'`)).toEqual([{ priority: 5, status: 'completed' }]);
    });

    it('a rolled back transaction leaves no job, no window key and no wake-up', async () => {
      await watchingWakeUps(url, async (writer, heard) => {
        const before = await one(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'welcome'`);
        await writer.query('BEGIN');
        await writer.query(`INSERT INTO signups (email) VALUES ('gone@example.com')`);
        await writer.query(`SELECT pg_queue_enqueue('rolled', '{}')`);
        await writer.query(`SELECT pg_queue_enqueue('rolled', '{}', unique_key => 'w', unique_for_ms => 3600000)`);
        await writer.query(`SELECT * FROM pg_queue_enqueue_many('[{"queue": "rolled", "payload": 1}, {"queue": "rolled", "payload": 2, "unique_key": "k"}]')`);
        expect((await writer.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'rolled'`)).rows[0].n).toBe(4); // its own writes
        await writer.query('ROLLBACK');
        expect(await heardBefore(db, heard)).toEqual([]);
        expect(await one(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'rolled'`)).toEqual({ n: 0 });
        expect(await one(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'welcome'`)).toEqual(before);
        expect(await one(`SELECT count(*)::int AS n FROM background_job_keys WHERE queue_name = 'rolled'`)).toEqual({ n: 0 });
        // The window was never taken.
        expect(await outcomes(`pg_queue_enqueue_unique('rolled', '{}', unique_key => 'w', unique_for_ms => 3600000)`)).toEqual([{ id: expect.any(String), duplicate: false, replaced: false }]);
      });
    });
  });

  describe('refused input: an error naming the problem (SQLSTATE 22023), nothing stored', () => {
    const LONG = 'x'.repeat(256);
    const cases: [sqlCall: string, message: string][] = [
      [`pg_queue_enqueue('', '{}')`, 'Invalid queue name "": use 1 to 128 characters from A-Z a-z 0-9 _ . : -'],
      [`pg_queue_enqueue('no spaces', '{}')`, 'Invalid queue name "no spaces": use 1 to 128 characters from A-Z a-z 0-9 _ . : -'],
      [`pg_queue_enqueue(NULL, '{}')`, 'Invalid queue name null: use 1 to 128 characters from A-Z a-z 0-9 _ . : -'],
      [`pg_queue_enqueue('bad', NULL)`, `Cannot enqueue to "bad": the payload is missing (NULL); pass a JSON value ('null'::jsonb for a JSON null).`],
      [`pg_queue_enqueue('bad', '{}', priority => -2147483648)`, 'Invalid pg_queue_enqueue("bad") option priority=-2147483648: expected an integer (32-bit).'],
      [`pg_queue_enqueue('bad', '{}', max_attempts => 0)`, 'Invalid pg_queue_enqueue("bad") option max_attempts=0: expected an integer from 1 to 1000.'],
      [`pg_queue_enqueue('bad', '{}', max_attempts => 1001)`, 'Invalid pg_queue_enqueue("bad") option max_attempts=1001: expected an integer from 1 to 1000.'],
      [`pg_queue_enqueue('bad', '{}', delay_ms => -1)`, 'Invalid pg_queue_enqueue("bad") option delay_ms=-1: expected a non-negative integer.'],
      [`pg_queue_enqueue('bad', '{}', delay_ms => 31557600000001)`, 'Invalid pg_queue_enqueue("bad") option delay_ms=31557600000001: expected a non-negative integer of at most 31557600000000 (1,000 years).'],
      [`pg_queue_enqueue('bad', '{}', run_at => now(), delay_ms => 5000)`, 'Invalid pg_queue_enqueue("bad") option delay_ms=5000: expected no delay_ms with run_at (give one of them).'],
      [`pg_queue_enqueue('bad', '{}', run_at => 'infinity')`, 'Invalid pg_queue_enqueue("bad") option run_at="infinity": expected a date-time from year 1 to 9999 (in JSON: ISO 8601 with its UTC offset, e.g. "2026-12-01T08:00:00Z").'],
      [`pg_queue_enqueue_many('[{"queue": "bad", "payload": 1, "run_at": "10000-01-01T00:00:00Z"}]')`, 'pg_queue_enqueue_many: job #0: Invalid pg_queue_enqueue("bad") option run_at="10000-01-01T00:00:00Z": expected a date-time from year 1 to 9999 (in JSON: ISO 8601 with its UTC offset, e.g. "2026-12-01T08:00:00Z").'],
      [`pg_queue_enqueue_many('[{"queue": "bad", "payload": 1, "run_at": "0001-01-01T00:00:00+01:00"}]')`, 'pg_queue_enqueue_many: job #0: Invalid pg_queue_enqueue("bad") option run_at="0001-01-01T00:00:00+01:00": expected a date-time from year 1 to 9999 (in JSON: ISO 8601 with its UTC offset, e.g. "2026-12-01T08:00:00Z").'],
      [`pg_queue_enqueue('bad', '{}', concurrency_key => '')`, 'Invalid pg_queue_enqueue("bad") option concurrency_key="": expected a non-empty string of at most 512 characters.'],
      [`pg_queue_enqueue('bad', '{}', trace_context => '"00-abc"')`, 'Invalid pg_queue_enqueue("bad") option trace_context="00-abc": expected a JSON object {"traceparent": "00-...", "tracestate"?: "..."}.'],
      [`pg_queue_enqueue('bad', '{}', on_conflict => 'replace')`, 'Invalid pg_queue_enqueue("bad") option on_conflict="replace": expected no on_conflict without a unique_key.'],
      [`pg_queue_enqueue('bad', '{}', unique_for_ms => 1000)`, 'Invalid pg_queue_enqueue("bad") option unique_for_ms=1000: expected no unique_for_ms without a unique_key.'],
      [`pg_queue_enqueue('bad', '{}', unique_key => '')`, 'Invalid pg_queue_enqueue("bad") option unique_key="": expected a string of 1 to 255 characters.'],
      [`pg_queue_enqueue('bad', '{}', unique_key => '${LONG}')`, `Invalid pg_queue_enqueue("bad") option unique_key="${LONG}": expected a string of 1 to 255 characters.`],
      [`pg_queue_enqueue('bad', '{}', unique_key => 'k', on_conflict => 'sometimes')`, `Invalid pg_queue_enqueue("bad") option on_conflict="sometimes": expected one of 'keep', 'replace', 'keep-run-at', 'queue-after'.`],
      [`pg_queue_enqueue('bad', '{}', unique_key => 'k', unique_for_ms => 0)`, 'Invalid pg_queue_enqueue("bad") option unique_for_ms=0: expected an integer from 1 to 315360000000 (ms).'],
      [`pg_queue_enqueue('bad', '{}', unique_key => 'k', unique_for_ms => 1000, on_conflict => 'replace')`, `Invalid pg_queue_enqueue("bad") option on_conflict="replace": expected 'keep' with unique_for_ms (a window's job is not replaced).`],
      [`pg_queue_enqueue_unique('bad', '{}')`, 'pg_queue_enqueue_unique("bad") needs a unique_key; use pg_queue_enqueue() for a job without one.'],
      [`pg_queue_enqueue_many('{"queue": "bad"}')`, 'pg_queue_enqueue_many expects a JSON array of jobs [{"queue": ..., "payload": ..., ...options}]; got {"queue": "bad"}'],
      [`pg_queue_enqueue_many(NULL)`, 'pg_queue_enqueue_many expects a JSON array of jobs [{"queue": ..., "payload": ..., ...options}]; got NULL'],
      [`pg_queue_enqueue_many('[{"queue": "bad", "payload": 1}, 7]')`, 'pg_queue_enqueue_many: job #1: expected a job as a JSON object {"queue": ..., "payload": ..., ...options}; got 7'],
      [
        `pg_queue_enqueue_many('[{"queue": "bad", "payload": 1, "delayMs": 5}]')`,
        'pg_queue_enqueue_many: job #0: unknown option "delayMs"; known options: queue, payload, run_at, delay_ms, priority, max_attempts, unique_key, on_conflict, unique_for_ms, concurrency_key, trace_context, lifo',
      ],
      [`pg_queue_enqueue_many('[{"queue": "bad"}]')`, `pg_queue_enqueue_many: job #0: Cannot enqueue to "bad": the payload is missing (NULL); pass a JSON value ('null'::jsonb for a JSON null).`],
      [
        `pg_queue_enqueue_many('[{"queue": "bad", "payload": 1}, {"queue": "bad", "payload": 2, "unique_key": "k"}, {"queue": "bad", "payload": 3, "priority": 1.5}]')`,
        'pg_queue_enqueue_many: job #2: Invalid pg_queue_enqueue("bad") option priority=1.5: expected an integer (32-bit).',
      ],
      [`pg_queue_enqueue_many('[{"queue": "bad", "payload": 1, "priority": "3"}]')`, 'pg_queue_enqueue_many: job #0: Invalid pg_queue_enqueue("bad") option priority="3": expected an integer (32-bit).'],
      [`pg_queue_enqueue_many('[{"queue": "bad", "payload": 1, "max_attempts": 2.5}]')`, 'pg_queue_enqueue_many: job #0: Invalid pg_queue_enqueue("bad") option max_attempts=2.5: expected an integer from 1 to 1000.'],
      [`pg_queue_enqueue_many('[{"queue": "bad", "payload": 1, "run_at": "tomorrow"}]')`, 'pg_queue_enqueue_many: job #0: Invalid pg_queue_enqueue("bad") option run_at="tomorrow": expected a date-time from year 1 to 9999 (in JSON: ISO 8601 with its UTC offset, e.g. "2026-12-01T08:00:00Z").'],
      [`pg_queue_enqueue_many('[{"queue": "bad", "payload": 1, "run_at": "2026-12-01T08:00:00"}]')`, 'pg_queue_enqueue_many: job #0: Invalid pg_queue_enqueue("bad") option run_at="2026-12-01T08:00:00": expected a date-time from year 1 to 9999 (in JSON: ISO 8601 with its UTC offset, e.g. "2026-12-01T08:00:00Z").'],
      [`pg_queue_enqueue_many('[{"queue": 3, "payload": 1}]')`, 'pg_queue_enqueue_many: job #0: Invalid queue name 3: use 1 to 128 characters from A-Z a-z 0-9 _ . : -'],
    ];
    it.each(cases)('%s', async (sqlCall, message) => {
      const count = () => one(`SELECT (SELECT count(*)::int FROM background_jobs) AS jobs, (SELECT count(*)::int FROM background_job_keys) AS keys`);
      const before = await count();
      await expect(db.query(`SELECT * FROM ${sqlCall}`)).rejects.toMatchObject({ code: '22023', message });
      expect(await count()).toEqual(before);
    });

    it('the bounds themselves are accepted', async () => {
      const id = await enqueueSql(`pg_queue_enqueue('edge', '{}', priority => 2147483647, max_attempts => 1000, delay_ms => 31557600000000, concurrency_key => $1)`, ['c'.repeat(512)]);
      expect(await job(id)).toMatchObject({ priority: 2147483647, max_attempts: 1000, delay_ms: '31557600000000' });
      const [keyed] = await outcomes(`pg_queue_enqueue_unique('edge', '{}', unique_key => $1, unique_for_ms => 315360000000, run_at => '9999-12-31T23:59:59.999Z')`, ['k'.repeat(255)]);
      expect(keyed.duplicate).toBe(false);
    });
  });
});

/** `work` with a connection to write on and the wake-ups (pg_queue_jobs notices) a second one hears, as `channel:queue`. */
/**
 * What the listener heard before a marker notice sent now, on its own connection, has arrived. Notices are delivered
 * in commit order: one committed before the marker arrives before it, so once the marker is here nothing earlier is
 * still on its way.
 */
async function heardBefore(db: pg.Pool, heard: string[]): Promise<string[]> {
  const marker = `pg_queue_jobs:marker-${Date.now()}-${Math.random()}`;
  await db.query(`SELECT pg_notify('pg_queue_jobs', $1)`, [marker.slice('pg_queue_jobs:'.length)]);
  await waitFor('the marker notice', async () => heard.includes(marker), 10_000, 5);
  return heard.slice(0, heard.indexOf(marker));
}

async function watchingWakeUps(url: string, work: (writer: pg.Client, heard: string[]) => Promise<void>): Promise<void> {
  const listener = new pg.Client({ connectionString: url });
  const writer = new pg.Client({ connectionString: url });
  await Promise.all([listener.connect(), writer.connect()]);
  try {
    const heard: string[] = [];
    listener.on('notification', (n) => heard.push(`${n.channel}:${n.payload}`));
    await listener.query('LISTEN pg_queue_jobs');
    await work(writer, heard);
  } finally {
    await Promise.all([listener.end(), writer.end()]);
  }
}
