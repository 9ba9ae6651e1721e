import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { DataSource } from 'typeorm';
import { JobEvents, JobHandler, PgQueueModule, QueueService, type Job, type JobEvent, type TransactionalJob } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { JOBS_CHANNEL } from '../src/pg-queue.constants.js';
import { SQL } from '../src/store/job.sql.js';
import { WorkerPool } from '../src/worker/worker-pool.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// Issue 39, "the database must know, exactly, whether a job has started" (items 1, 4, 7, 9), in one process; the
// same promises with two worker processes, cancels, replaces and failing flows: start-marks-processes.spec.ts.
// Every test asserts on what the tables hold: sm_runs records each handler call with the job's row as the handler
// found it.

const RUNS = `CREATE TABLE sm_runs (id bigserial PRIMARY KEY, job_id int8, attempt int, instance text, priority int, status text, buffered boolean, attempts int,
  lease_ms float8, at timestamptz DEFAULT clock_timestamp())`;

let db: pg.Pool;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function record(job: Job, instance: string): Promise<void> {
  await db.query(
    `INSERT INTO sm_runs (job_id, attempt, instance, priority, status, buffered, attempts, lease_ms)
     SELECT id, $2, $3, priority, status::text, buffered, attempts, (extract(epoch FROM lease_expires_at - now()) * 1000)::float8 FROM background_jobs WHERE id = $1`,
    [job.id, job.attempt, instance],
  );
}

@Injectable()
class Handlers {
  /** concurrency 1 and a buffer: every job but the first of a claim starts from the buffer. */
  @JobHandler('sm-buffer', { concurrency: 1, prefetch: 10, eagerStart: false })
  async buffer(job: Job) {
    await record(job, 'a');
    await sleep(5);
  }

  @JobHandler('sm-order', { concurrency: 1, prefetch: 20, eagerStart: false })
  async order(job: Job) {
    await record(job, 'a');
    await sleep(2);
  }

  /** The job with `gate` holds the one slot until the test opens it; the others wait in the buffer behind it. */
  @JobHandler('sm-stop', { concurrency: 1, prefetch: 10, eagerStart: false })
  async stop(job: Job<{ gate?: boolean }>) {
    await record(job, 'a');
    // The others take 100 ms, far longer than a round trip: none is started ahead (armed) behind the gate job.
    await (job.payload.gate ? gate.promise : sleep(100));
  }
}

/** The gate of sm-stop's first job: a promise and what opens it. */
function newGate(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
let gate = newGate();

/**
 * A pause or a block stored with no notice to the holders (as when the notice is lost, or late on a loaded machine):
 * the SQL of each, and how it is lifted. `keyed`: only the jobs of key 'k' are stopped.
 */
const SILENT_STOPS = [
  {
    stop: 'the queue paused',
    keyed: false,
    apply: `UPDATE background_queues SET paused = true WHERE queue_name = 'sm-stop'`,
    lift: `UPDATE background_queues SET paused = false WHERE queue_name = 'sm-stop'`,
  },
  {
    stop: 'the queue blocked by a 429',
    keyed: false,
    apply: `UPDATE background_queues SET blocked_until = now() + interval '1 hour' WHERE queue_name = 'sm-stop'`,
    lift: `UPDATE background_queues SET blocked_until = NULL WHERE queue_name = 'sm-stop'`,
  },
  {
    stop: 'its key blocked by a 429',
    keyed: true,
    apply: `INSERT INTO background_queue_key_blocks (queue_name, concurrency_key, blocked_until) VALUES ('sm-stop', 'k', now() + interval '1 hour');
            UPDATE background_queues SET key_blocked_until = now() + interval '1 hour' WHERE queue_name = 'sm-stop'`,
    lift: `DELETE FROM background_queue_key_blocks WHERE queue_name = 'sm-stop';
           UPDATE background_queues SET key_blocked_until = NULL WHERE queue_name = 'sm-stop'`,
  },
];

describe('start marks: a job from the buffer is told to its row before its handler is called', () => {
  let app: INestApplicationContext;
  beforeAll(async () => {
    const url = await createTestDatabase('start_marks');
    db = sqlPool(url);
    await db.query(RUNS);
    app = await startApp(url, { providers: [Handlers], queue: { leaseMs: 30_000, maintenance: { enabled: false } } });
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('item 1: every handler of a job started from the buffer finds its row started (not buffered), charged, on the full lease', async () => {
    const queue = app.get(QueueService);
    await queue.pause('sm-buffer');
    const ids = await queue.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ queue: 'sm-buffer', payload: { i } })));
    await queue.resume('sm-buffer');
    await waitFor('all ran', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'sm-buffer' AND status = 'completed'`)).rows[0].n === ids.length);
    const { rows } = await db.query<{ buffered: boolean; charged: boolean; full_lease: boolean; n: number }>(
      `SELECT buffered, attempts = attempt AS charged, lease_ms > 10000 AS full_lease, count(*)::int AS n FROM sm_runs
       WHERE job_id = ANY($1::int8[]) GROUP BY 1, 2, 3 ORDER BY 4`,
      [ids],
    );
    expect(rows).toEqual([{ buffered: false, charged: true, full_lease: true, n: ids.length }]);
  });

  it('item 4: buffered jobs start in claim order (priority, then run_at, then id), not in id order', async () => {
    const queue = app.get(QueueService);
    await queue.pause('sm-order');
    const low = await queue.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ queue: 'sm-order', payload: { i }, priority: 0 })));
    const high = await queue.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ queue: 'sm-order', payload: { i }, priority: 10 })));
    await queue.resume('sm-order');
    await waitFor('all ran', async () => (await db.query(`SELECT count(*)::int AS n FROM sm_runs WHERE job_id = ANY($1::int8[])`, [[...low, ...high]])).rows[0].n === 100, 30_000);
    const { rows } = await db.query<{ job_id: string; priority: number }>(`SELECT job_id::text, priority FROM sm_runs WHERE job_id = ANY($1::int8[]) ORDER BY id`, [[...low, ...high]]);
    const order = rows.map((r) => r.job_id);
    // Every high-priority job before any low one, and each priority in id order (its run_at order).
    expect(order).toEqual([...high, ...low]);
  });

  it.each(SILENT_STOPS)('a buffered job starts in no process once $stop, even with no notice: its start mark gives it back uncharged', async ({ keyed, apply, lift }) => {
    const queue = app.get(QueueService);
    gate = newGate();
    await db.query(`DELETE FROM background_jobs WHERE queue_name = 'sm-stop'`);
    await queue.pause('sm-stop');
    const [held] = await queue.enqueueMany([{ queue: 'sm-stop', payload: { gate: true }, priority: 10 }]);
    const buffered = await queue.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ queue: 'sm-stop', payload: { i }, concurrencyKey: i % 2 === 0 ? 'k' : 'other' })));
    const stopped = keyed ? buffered.filter((_, i) => i % 2 === 0) : buffered;
    const others = buffered.filter((id) => !stopped.includes(id));
    await queue.resume('sm-stop');
    await waitFor('the gate job running, the others in its buffer', async () => {
      const { rows: [n] } = await db.query<{ b: number; r: number }>(
        `SELECT count(*) FILTER (WHERE buffered)::int AS b, count(*) FILTER (WHERE id = $1 AND NOT buffered)::int AS r
         FROM background_jobs WHERE queue_name = 'sm-stop' AND status = 'processing'`, [held]);
      return n.b === 6 && n.r === 1;
    }, 10_000, 5);
    await db.query(apply);
    gate.resolve();
    await waitFor('no job of the buffer held any more', async () => (await db.query(
      `SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'sm-stop' AND status = 'processing'`)).rows[0].n === 0, 10_000, 20);
    const { rows: runs } = await db.query<{ job_id: string }>(`SELECT job_id::text FROM sm_runs WHERE job_id = ANY($1::int8[])`, [stopped]);
    const { rows } = await db.query<{ status: string; attempts: number; buffered: boolean; n: number }>(
      `SELECT status::text, attempts, buffered, count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) GROUP BY 1, 2, 3`, [stopped]);
    expect({ runs: runs.length, rows }).toEqual({ runs: 0, rows: [{ status: 'queued', attempts: 0, buffered: false, n: stopped.length }] });
    if (others.length > 0) {
      const { rows: ran } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'completed'`, [others]);
      expect(ran[0].n).toBe(others.length); // the other key's jobs started from the same buffer
    }
    // Lifted (and the workers woken, as the end of a pause or a block wakes them), they run once each, on their first attempt.
    await db.query(lift);
    await db.query(`SELECT pg_notify($1, 'sm-stop')`, [JOBS_CHANNEL]);
    await waitFor('all ran', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'completed'`, [stopped])).rows[0].n === stopped.length, 30_000);
    const { rows: once } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM sm_runs WHERE job_id = ANY($1::int8[]) AND attempt = 1`, [stopped]);
    expect(once[0].n).toBe(stopped.length);
  });

  it('a start mark that gives back some jobs and marks others locks its rows in id order, as a bulk cancel does (no deadlock)', async () => {
    const queue = app.get(QueueService);
    // A queue no handler serves: its rows are set up by hand as one worker's buffer (processing, buffered, fence 1).
    const [first, second] = await queue.enqueueMany([
      { queue: 'sm-lock-order', payload: {}, concurrencyKey: 'k' },
      { queue: 'sm-lock-order', payload: {}, concurrencyKey: 'other' },
    ]);
    await db.query(`UPDATE background_jobs SET status = 'processing', locked_by = 'w-lock', buffered = true, fence_token = 1, lease_expires_at = now() + interval '1 minute' WHERE id = ANY($1::int8[])`, [[first, second]]);
    await db.query(`INSERT INTO background_queue_key_blocks (queue_name, concurrency_key, blocked_until) VALUES ('sm-lock-order', 'k', now() + interval '1 hour')`);
    await db.query(`INSERT INTO background_queues (queue_name, key_blocked_until) VALUES ('sm-lock-order', now() + interval '1 hour')`);
    // A bulk cancel's order: the lower id first (LOCKED_BATCH, ORDER BY id ... FOR UPDATE), held here.
    const cancel = await db.connect();
    const mark = await db.connect();
    try {
      await cancel.query('BEGIN');
      await cancel.query(`SELECT id FROM background_jobs WHERE id = $1 FOR UPDATE`, [first]);
      const { rows: [{ pid }] } = await mark.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`);
      const marking = mark.query<{ id: string }>(SQL.markStarted, ['w-lock', 30_000, [first, second], JSON.stringify({ [first]: '1', [second]: '1' })]);
      await waitFor('the mark waiting on the first row', async () => (await db.query(`SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1`, [pid])).rows[0]?.wait_event_type === 'Lock', 10_000, 5);
      // Waiting on the lower id, the mark holds no higher one: the cancel takes the second row without waiting. (Two
      // UPDATEs, marking then giving back, locked the second first and waited for the first: a deadlock with this.)
      await expect(cancel.query(`SELECT id FROM background_jobs WHERE id = $1 FOR UPDATE NOWAIT`, [second])).resolves.toBeDefined();
      await cancel.query('ROLLBACK');
      const marked = await marking;
      expect(marked.rows.map((r) => r.id)).toEqual([second]);
      const { rows } = await db.query<{ id: string; status: string; attempts: number; buffered: boolean }>(
        `SELECT id::text, status::text, attempts, buffered FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id`, [[first, second]]);
      expect(rows).toEqual([
        { id: first, status: 'queued', attempts: 0, buffered: false }, // its key blocked: given back, uncharged
        { id: second, status: 'processing', attempts: 1, buffered: false }, // marked started, charged
      ]);
    } finally {
      cancel.release();
      mark.release();
    }
  });
});

// Item 7: the eager insert commits and its answer is lost (a TCP proxy that stops carrying the server's bytes back).
@Injectable()
class EagerHandlers {
  constructor(private readonly queue: QueueService) {}
  static instanceOf = new WeakMap<QueueService, string>();

  @JobHandler('sm-eager', { concurrency: 2, maxAttempts: 1 })
  async eager(job: Job) {
    await record(job, EagerHandlers.instanceOf.get(this.queue) ?? '?');
  }

  /** Attempts to spare: inserted started (charged), as a claim into a free slot would make it. */
  @JobHandler('sm-eager-retry', { concurrency: 2, maxAttempts: 3 })
  async eagerRetry(job: Job) {
    await record(job, EagerHandlers.instanceOf.get(this.queue) ?? '?');
  }
}

describe('start marks: an eager insert whose answer is lost (issue 39 item 7)', () => {
  let url: string;
  let proxy: TcpProxy & { url: string };
  let cut: INestApplicationContext | undefined;
  let other: INestApplicationContext | undefined;
  beforeAll(async () => {
    url = await createTestDatabase('start_marks_eager');
    db = sqlPool(url);
    await db.query(RUNS);
    proxy = await TcpProxy.start(url);
  });
  afterAll(async () => {
    await proxy?.refuse();
    await Promise.race([cut?.close(), sleep(5_000)]).catch(() => undefined);
    await other?.close();
    await db?.end();
  });

  it.each([
    ['sm-eager', 'on its last attempt (maxAttempts 1): inserted buffered, put back uncharged', { buffered: true, attempts: 0 }, 1],
    ['sm-eager-retry', 'with attempts to spare: inserted started, the lost answer costs that attempt', { buffered: false, attempts: 1 }, 2],
  ])('%s, %s: it runs once elsewhere and completes, never dead-lettered unrun', async (queueName, _what, insertedAs, ranAs) => {
    const settings = { leaseMs: 2_000, heartbeatMs: 500, workerId: 'cut' };
    let id = '';
    let inserted: { status: string } | undefined;
    // An enqueue that finds the slot taken (a claim of the warm-up's wake-up slipped in after the check below) goes in
    // `queued`, not eagerly: that try proves nothing, so it is set up again (at most three times).
    for (let attempt = 0; attempt < 3 && inserted?.status !== 'processing'; attempt++) {
      if (cut) {
        await proxy.refuse();
        await Promise.race([cut.close(), sleep(5_000)]).catch(() => undefined);
        await db.query(`DELETE FROM background_jobs WHERE id = $1`, [id]);
        proxy = await TcpProxy.start(url);
      }
      // No poll: no claim of this instance's may take the job (its answer would be lost too); only the eager insert does.
      cut = await startApp(proxy.url, { providers: [EagerHandlers], queue: { ...settings, pollIntervalMs: 600_000, maintenance: { enabled: false } } });
      EagerHandlers.instanceOf.set(cut.get(QueueService), 'cut');
      // A job through the proxy first: the pool then has a connection open, on which the eager insert goes.
      const warm = await cut.get(QueueService).enqueue(queueName, { warm: true });
      await waitFor('the warm-up job completed', async () => (await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [warm])).rows[0]?.status === 'completed');
      await waitFor('no claim in flight', async () => cut!.get(WorkerPool).claimLoops().every((l) => l.claimingForMs === 0), 10_000, 2);
      proxy.holdReplies();
      const before = (await db.query<{ id: string }>(`SELECT coalesce(max(id), 0)::text AS id FROM background_jobs`)).rows[0].id;
      void cut.get(QueueService).enqueue(queueName, { lost: true }).catch(() => undefined);
      id = await waitFor('the eager insert committed', async () => (await db.query<{ id: string }>(`SELECT id::text FROM background_jobs WHERE id > $1`, [before])).rows[0]?.id);
      inserted = (await db.query(`SELECT status::text, locked_by, buffered, attempts FROM background_jobs WHERE id = $1`, [id])).rows[0];
    }
    // Another instance, with the sweeper, on a direct connection.
    other = await startApp(url, { providers: [EagerHandlers], queue: { ...settings, workerId: 'other', maintenance: { sweepIntervalMs: 200 } } });
    EagerHandlers.instanceOf.set(other.get(QueueService), 'other');
    await waitFor('the job finished', async () => ['completed', 'failed'].includes((await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0].status), 20_000, 50);
    const { rows: [row] } = await db.query(`SELECT status::text, attempts, locked_by FROM background_jobs WHERE id = $1`, [id]);
    const { rows: runs } = await db.query(`SELECT instance, attempt FROM sm_runs WHERE job_id = $1`, [id]);
    console.log(`eager insert with its answer lost: inserted ${JSON.stringify(inserted)}, ended ${JSON.stringify(row)}, runs ${JSON.stringify(runs)}`);
    expect({ inserted, row, runs }).toEqual({
      inserted: { status: 'processing', locked_by: 'cut', ...insertedAs },
      row: { status: 'completed', attempts: ranAs, locked_by: 'other' },
      runs: [{ instance: 'other', attempt: ranAs }],
    });
    await proxy.refuse();
    await Promise.race([cut!.close(), sleep(5_000)]).catch(() => undefined);
    await other.close();
    cut = other = undefined;
    proxy = await TcpProxy.start(url);
  }, 120_000);
});

// Item 9: a heartbeat waits on the row lock of a transactional handler's transaction (a trigger holds it 400 ms after
// the completion's UPDATE), then finds the row completed: that is the completion committing, not a lost lease. The
// app reaches PostgreSQL through a proxy that delays the answers 30 ms on the connections of the handlers'
// transactions (those that wrote sm_ledger), so that the heartbeat's answer is read before the COMMIT's, as it
// sometimes is on a loaded machine.
@Injectable()
class TxHandlers {
  // One at a time: a beat carrying several running jobs waits on each one's lock in turn, and answers after the last.
  @JobHandler('sm-tx', { transactional: true, concurrency: 1 })
  async post(job: TransactionalJob) {
    await job.manager.query(`INSERT INTO sm_ledger (job_id) VALUES ($1)`, [job.id]);
    return { ok: true };
  }
}

describe('start marks: a committed transactional completion is not a lost lease (issue 39 item 9)', () => {
  let app: INestApplicationContext;
  let dataSource: DataSource;
  let slow: TcpProxy;
  beforeAll(async () => {
    const url = await createTestDatabase('start_marks_tx');
    db = sqlPool(url);
    await db.query(`CREATE TABLE sm_ledger (job_id int8)`);
    const proxy = (slow = await TcpProxy.start(url, { slowAfter: { marker: 'sm_ledger', delayMs: 30 } }));
    dataSource = new DataSource({ type: 'postgres', url: proxy.url, extra: { max: 4 } });
    app = await startApp(url, {
      providers: [TxHandlers],
      imports: [PgQueueModule.forRoot({ dataSource, leaseMs: 5_000, heartbeatMs: 100, maintenance: { enabled: false } })],
    });
    await db.query(`
      CREATE FUNCTION sm_hold_lock() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.4); RETURN NULL; END $$;
      CREATE TRIGGER sm_hold_lock AFTER UPDATE ON background_jobs FOR EACH ROW
        WHEN (OLD.status = 'processing' AND NEW.status = 'completed' AND NEW.queue_name = 'sm-tx') EXECUTE FUNCTION sm_hold_lock();`);
  });
  afterAll(async () => {
    await app?.close();
    await dataSource?.destroy();
    await slow?.refuse();
    await db?.end();
  });

  it('every job completed in its transaction emits completed, none lease-lost', async () => {
    const events = app.get(JobEvents);
    const seen: JobEvent[] = [];
    const stop = events.listen((e) => seen.push(e));
    try {
      const queue = app.get(QueueService);
      const ids = await queue.enqueueMany(Array.from({ length: 8 }, (_, i) => ({ queue: 'sm-tx', payload: { i } })));
      await waitFor('all completed', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'completed'`, [ids])).rows[0].n === ids.length, 30_000);
      await waitFor('an answer per job', async () => seen.filter((e) => e.name === 'completed' || e.name === 'lease-lost').length >= ids.length, 5_000).catch(() => undefined);
      const count = (name: string) => seen.filter((e) => e.name === name).length;
      const { rows: [ledger] } = await db.query(`SELECT count(*)::int AS n FROM sm_ledger`);
      console.log(`transactional completions held 400 ms under 100 ms beats: ${count('completed')} completed events, ${count('lease-lost')} lease-lost`);
      expect({ completed: count('completed'), leaseLost: count('lease-lost'), ledger: ledger.n }).toEqual({ completed: ids.length, leaseLost: 0, ledger: ids.length });
    } finally {
      stop();
    }
  }, 60_000);
});

// Item 10: the fault suite's "unexplained double runs". Before the start mark, a job started from the buffer kept its
// row `buffered`, on the short lease of its claim, until a heartbeat tick marked it; that tick runs in the row-lock
// lane, behind whatever outcome batch holds it. Here a completion that takes 4.6 s (a trigger, as a loaded database
// would) holds the lane while the next job, started from the buffer, runs: its short lease (5 s from the claim)
// lapses before the tick can mark it, and another instance's sweeper puts it back as never started, uncharged, while
// its handler runs; that instance then runs it a second time, as the same attempt, with no fault to explain it.
@Injectable()
class LaneHandlers {
  constructor(private readonly queue: QueueService) {}
  static instanceOf = new WeakMap<QueueService, string>();

  @JobHandler('sm-lane', { concurrency: 1, prefetch: 5, eagerStart: false })
  async lane(job: Job<{ ms: number }>) {
    await record(job, LaneHandlers.instanceOf.get(this.queue) ?? '?');
    await sleep(job.payload.ms);
  }
}

describe('start marks: a job started from the buffer is never put back as never started while it runs (issue 39 item 10)', () => {
  let url: string;
  let a: INestApplicationContext | undefined;
  let b: INestApplicationContext | undefined;
  beforeAll(async () => {
    url = await createTestDatabase('start_marks_lane');
    db = sqlPool(url);
    await db.query(RUNS);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.end();
  });

  it('a slow outcome batch in the lane does not let the sweeper take a running job started from the buffer', async () => {
    const settings = { leaseMs: 8_000, heartbeatMs: 1_000 };
    a = await startApp(url, { providers: [LaneHandlers], queue: { ...settings, workerId: 'a', maintenance: { enabled: false } } });
    LaneHandlers.instanceOf.set(a.get(QueueService), 'a');
    await db.query(`
      CREATE FUNCTION sm_slow_settle() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(4.6); RETURN NULL; END $$;
      CREATE TRIGGER sm_slow_settle AFTER UPDATE ON background_jobs FOR EACH ROW
        WHEN (OLD.status = 'processing' AND NEW.status = 'completed' AND NEW.payload ? 'slowSettle') EXECUTE FUNCTION sm_slow_settle();`);
    const queue = a.get(QueueService);
    await queue.pause('sm-lane');
    // One claim takes both: the first starts at once (1 s, then its completion holds the lane 4.6 s), the second
    // waits in the buffer and starts when the first ends, 1 s after the claim.
    const [first, second] = await queue.enqueueMany([
      { queue: 'sm-lane', payload: { ms: 1_000, slowSettle: true } },
      { queue: 'sm-lane', payload: { ms: 7_000 } },
    ]);
    await queue.resume('sm-lane');
    await waitFor('a holding both', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE locked_by = 'a' AND status = 'processing'`)).rows[0].n === 2, 10_000, 10);
    // Another instance with the sweeper (and a worker of the queue) joins.
    b = await startApp(url, { providers: [LaneHandlers], queue: { ...settings, workerId: 'b', maintenance: { sweepIntervalMs: 200 } } });
    LaneHandlers.instanceOf.set(b.get(QueueService), 'b');
    await waitFor('both finished', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'completed'`, [[first, second]])).rows[0].n === 2, 30_000, 100);
    const { rows: runs } = await db.query(`SELECT instance, attempt FROM sm_runs WHERE job_id = $1 ORDER BY id`, [second]);
    console.log(`a job started from the buffer behind a 4.6 s outcome batch: runs ${JSON.stringify(runs)}`);
    expect(runs).toEqual([{ instance: 'a', attempt: 1 }]);
  }, 60_000);
});
