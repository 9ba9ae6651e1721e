import { Injectable } from '@nestjs/common';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { JOBS_CHANNEL } from '../src/pg-queue.constants.js';
import { resolveHandlerOptions } from '../src/utils/resolve-options.js';
import { WorkerPool } from '../src/worker/worker-pool.js';
import { useTestApp, waitFor } from './support/test-app.js';

// Eager start (JobHandlerOptions.eagerStart, insertEagerJob in store/job.sql.ts): an enqueue made in the worker's
// process, while the queue's worker there has a free slot, inserts the job already claimed and starts it when the
// insert returns. Every test asserts on what the tables hold: eager_log records each row as inserted and every
// claim (an UPDATE from queued to processing), eager_runs every start of a handler with its row as it saw it.

const WORKER_ID = 'eager-spec-worker';

interface Payload {
  tag: string;
  mode?: 'ok' | 'hold' | 'fail-once';
}

/** Handlers that hold until told: tag -> release. */
const holds = new Map<string, () => void>();
const release = (tag: string) => holds.get(tag)?.();

let db: pg.Pool;

/** Handlers running now, and the most at once, per queue. */
const active = new Map<string, number>();
const peak = new Map<string, number>();

async function recordRun(job: Job<Payload>): Promise<void> {
  await db.query(
    `INSERT INTO eager_runs (job_id, attempt, status, locked_by, fence_token, buffered, keys)
     SELECT id, $2, status::text, locked_by, fence_token, buffered, $3 FROM background_jobs WHERE id = $1`,
    [job.id, job.attempt, Object.keys(job.payload).join(',')],
  );
}

async function run(job: Job<Payload>): Promise<void> {
  const now = (active.get(job.queue) ?? 0) + 1;
  active.set(job.queue, now);
  peak.set(job.queue, Math.max(now, peak.get(job.queue) ?? 0));
  try {
    await runJob(job);
  } finally {
    active.set(job.queue, active.get(job.queue)! - 1);
  }
}

async function runJob(job: Job<Payload>): Promise<void> {
  await recordRun(job);
  if (job.payload.mode === 'hold') {
    await new Promise<void>((resolve, reject) => {
      holds.set(job.payload.tag, resolve);
      job.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
    });
  }
  if (job.payload.mode === 'fail-once' && job.attempt === 1) throw new Error('first attempt fails');
}

@Injectable()
class EagerHandlers {
  @JobHandler('eager', { concurrency: 2, maxAttempts: 3, backoff: () => 0 })
  eager(job: Job<Payload>) {
    return run(job);
  }

  @JobHandler('eager-one', { concurrency: 1 })
  one(job: Job<Payload>) {
    return run(job);
  }

  @JobHandler('eager-read-ahead', { concurrency: 1, prefetch: 490 })
  readAhead(job: Job<Payload>) {
    return run(job);
  }

  @JobHandler('eager-off', { eagerStart: false })
  off(job: Job<Payload>) {
    return run(job);
  }

  @JobHandler('eager-limited', { globalConcurrency: 5 })
  limited(job: Job<Payload>) {
    return run(job);
  }
}

const TABLES = `
  CREATE TABLE eager_runs (job_id bigint, attempt int, status text, locked_by text, fence_token bigint, buffered boolean, keys text, at timestamptz DEFAULT clock_timestamp());
  CREATE TABLE eager_log (job_id bigint, what text, status text, at timestamptz DEFAULT clock_timestamp());
  CREATE FUNCTION eager_log_insert() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN INSERT INTO eager_log (job_id, what, status) VALUES (NEW.id, 'insert', NEW.status::text); RETURN NULL; END $$;
  CREATE FUNCTION eager_log_claim() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN INSERT INTO eager_log (job_id, what, status) VALUES (NEW.id, 'claim', NEW.status::text); RETURN NULL; END $$;
  CREATE FUNCTION eager_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN RAISE EXCEPTION 'eager spec: this payload is refused'; END $$;`;

/** The triggers go on background_jobs once the module's migrations made it. */
const TRIGGERS = `
  CREATE TRIGGER eager_log_insert AFTER INSERT ON background_jobs FOR EACH ROW EXECUTE FUNCTION eager_log_insert();
  CREATE TRIGGER eager_log_claim AFTER UPDATE ON background_jobs FOR EACH ROW
    WHEN (OLD.status = 'queued' AND NEW.status = 'processing') EXECUTE FUNCTION eager_log_claim();
  CREATE TRIGGER eager_refuse BEFORE INSERT ON background_jobs FOR EACH ROW
    WHEN (NEW.payload ->> 'tag' = 'refused') EXECUTE FUNCTION eager_refuse();`;

describe('eager start: a job enqueued beside its worker starts from its insert', () => {
  const ctx = useTestApp('eager_start', { providers: [EagerHandlers], queue: { workerId: WORKER_ID, maintenance: { enabled: false } } }, (pool) => pool.query(TABLES));
  let queue: QueueService;
  let listener: pg.Client;
  const notices: string[] = [];

  beforeAll(async () => {
    db = ctx.db;
    await db.query(TRIGGERS);
    queue = ctx.app.get(QueueService);
    listener = new pg.Client({ connectionString: ctx.url });
    await listener.connect();
    listener.on('notification', (n) => notices.push(n.payload ?? ''));
    await listener.query(`LISTEN ${JOBS_CHANNEL}`);
  });
  afterAll(async () => {
    for (const tag of holds.keys()) release(tag);
    await listener?.end();
  });
  beforeEach(() => {
    notices.length = 0;
  });

  const log = async (id: string) => (await db.query<{ what: string; status: string }>(`SELECT what, status FROM eager_log WHERE job_id = $1 ORDER BY at`, [id])).rows;
  const runs = async (id: string) =>
    (await db.query<{ attempt: number; status: string; locked_by: string; fence_token: string; buffered: boolean }>(`SELECT attempt, status, locked_by, fence_token, buffered FROM eager_runs WHERE job_id = $1 ORDER BY at`, [id])).rows;
  const row = async (id: string) => (await db.query<{ status: string; attempts: number; fence_token: string }>(`SELECT status::text, attempts, fence_token FROM background_jobs WHERE id = $1`, [id])).rows[0];
  const finished = (id: string, status = 'completed') => waitFor(`job ${id} ${status}`, async () => (await row(id))?.status === status);
  /** A claim in flight keeps the free slots for the jobs it may bring: eager starts wait for it to come back. */
  const claimsIdle = () => waitFor('no claim in flight', async () => ctx.app.get(WorkerPool).claimLoops().every((l) => l.claimingForMs === 0), 10_000, 2);
  /** Every notice committed before this marker has arrived once it has (notices come in commit order). */
  const noticesSettled = async () => {
    const marker = `marker-${Date.now()}-${Math.random()}`;
    await db.query(`SELECT pg_notify($1, $2)`, [JOBS_CHANNEL, marker]);
    await waitFor('the marker notice', async () => notices.includes(marker), 10_000, 5);
  };

  it('inserts the job claimed by this worker (attempt 1, fence token 1, its lease) and runs it without a claim or a NOTIFY', async () => {
    await claimsIdle(); // the boot's first claim keeps the free slots for what it may bring back
    const id = await queue.enqueue<Payload>('eager', { tag: 'plain' });
    await finished(id);
    expect(await log(id)).toEqual([{ what: 'insert', status: 'processing' }]);
    expect(await runs(id)).toEqual([{ attempt: 1, status: 'processing', locked_by: WORKER_ID, fence_token: '1', buffered: false }]);
    expect(await row(id)).toEqual({ status: 'completed', attempts: 1, fence_token: '1' });
    await noticesSettled();
    expect(notices.filter((n) => n === 'eager')).toEqual([]);
  });

  it('gives the handler the payload as stored (jsonb, as a claim returns it), not the caller’s object', async () => {
    const payload = { tag: 'as-stored', b: 1, a: [1, 2], nested: { z: true } } as Payload & Record<string, unknown>;
    const id = await queue.enqueue<Payload>('eager', payload);
    await finished(id);
    expect(await log(id)).toEqual([{ what: 'insert', status: 'processing' }]);
    // jsonb orders keys by length, then bytes: the handler saw the stored value, not the object it was given.
    expect((await db.query(`SELECT keys FROM eager_runs WHERE job_id = $1`, [id])).rows).toEqual([{ keys: 'a,b,tag,nested' }]);
  });

  it('queues the job of a paused queue (its NOTIFY sent); it runs from a claim after resume', async () => {
    await queue.pause('eager');
    try {
      const id = await queue.enqueue<Payload>('eager', { tag: 'paused' });
      expect(await log(id)).toEqual([{ what: 'insert', status: 'queued' }]);
      await noticesSettled();
      expect(notices).toContain('eager');
      expect(await row(id)).toMatchObject({ status: 'queued', attempts: 0 });
      await queue.resume('eager');
      await finished(id);
      expect(await log(id)).toEqual([
        { what: 'insert', status: 'queued' },
        { what: 'claim', status: 'processing' },
      ]);
    } finally {
      await queue.resume('eager');
    }
  });

  it('queues the job behind a due job of its priority or higher; a due job of lower priority does not hold it', async () => {
    // Due jobs the worker cannot take (locked by this test, as by another claim in flight): the statement counts them.
    await queue.pause('eager');
    const waiting = await queue.enqueue<Payload>('eager', { tag: 'waiting' }, { priority: 5 });
    const lower = await queue.enqueue<Payload>('eager', { tag: 'waiting-lower' }, { priority: -5 });
    const locker = await db.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(`SELECT id FROM background_jobs WHERE id = ANY($1::int8[]) FOR UPDATE`, [[waiting, lower]]);
      await queue.resume('eager');
      await claimsIdle();
      for (const priority of [5, 0, -10]) {
        const behind = await queue.enqueue<Payload>('eager', { tag: `behind-${priority}` }, { priority });
        expect((await log(behind))[0]).toEqual({ what: 'insert', status: 'queued' });
        await finished(behind);
      }
      await claimsIdle();
      const ahead = await queue.enqueue<Payload>('eager', { tag: 'ahead' }, { priority: 6 });
      expect(await log(ahead)).toEqual([{ what: 'insert', status: 'processing' }]);
      await finished(ahead);
    } finally {
      await locker.query('ROLLBACK');
      locker.release();
    }
    await db.query(`SELECT pg_notify($1, 'eager')`, [JOBS_CHANNEL]); // the rows this test locked are free: look again
    await finished(waiting);
    await finished(lower);
  });

  it('queues the job when every slot is busy; it is claimed when one frees', async () => {
    const first = await queue.enqueue<Payload>('eager-one', { tag: 'one-first', mode: 'hold' });
    await waitFor('the first job running', async () => holds.has('one-first'));
    const second = await queue.enqueue<Payload>('eager-one', { tag: 'one-second' });
    expect((await log(second))[0]).toEqual({ what: 'insert', status: 'queued' });
    release('one-first');
    await finished(first);
    await finished(second);
    expect(await log(first)).toEqual([{ what: 'insert', status: 'processing' }]);
    expect(await log(second)).toEqual([
      { what: 'insert', status: 'queued' },
      { what: 'claim', status: 'processing' },
    ]);
  });

  it('is never used in a caller’s transaction, for a delayed, keyed or unique job, with eagerStart: false or on a queue with limits', async () => {
    const ids: string[] = [];
    const client = await db.connect();
    try {
      await client.query('BEGIN');
      ids.push(await queue.enqueue<Payload>('eager', { tag: 'in-tx' }, { manager: client }));
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    ids.push(await queue.enqueue<Payload>('eager', { tag: 'delayed' }, { delayMs: 1 }));
    ids.push(await queue.enqueue<Payload>('eager', { tag: 'keyed' }, { concurrencyKey: 'k' }));
    ids.push(await queue.enqueue<Payload>('eager', { tag: 'unique' }, { uniqueKey: 'eager-unique' }));
    ids.push(await queue.enqueue<Payload>('eager-off', { tag: 'off' }));
    ids.push(await queue.enqueue<Payload>('eager-limited', { tag: 'limited' }));
    for (const id of ids) {
      await finished(id);
      expect(await log(id)).toEqual([
        { what: 'insert', status: 'queued' },
        { what: 'claim', status: 'processing' },
      ]);
    }
  });

  it('does not start ahead of jobs read ahead: with a job in the buffer, the enqueue queues', async () => {
    // One slot, held; the claim that follows reads the next jobs ahead into the buffer.
    const holder = await queue.enqueue<Payload>('eager-read-ahead', { tag: 'ra-hold', mode: 'hold' });
    await waitFor('the holder running', async () => holds.has('ra-hold'));
    const [buffered] = await queue.enqueueMany([{ queue: 'eager-read-ahead', payload: { tag: 'ra-buffered' } }]);
    await waitFor('the job read ahead', async () => (await db.query(`SELECT 1 FROM background_jobs WHERE id = $1 AND buffered`, [buffered])).rowCount === 1);
    release('ra-hold');
    const [after] = await Promise.all([queue.enqueue<Payload>('eager-read-ahead', { tag: 'ra-after' }), finished(holder)]);
    await finished(buffered);
    await finished(after);
    expect(await log(holder)).toEqual([{ what: 'insert', status: 'processing' }]);
    // The enqueue after the release found the buffered job first (started from the buffer) or a free slot with an empty buffer.
    const started = (await db.query<{ job_id: string }>(`SELECT job_id::text FROM eager_runs WHERE job_id = ANY($1::int8[]) ORDER BY at`, [[buffered, after]])).rows.map((r) => r.job_id);
    const afterLog = await log(after);
    if (afterLog[0].status === 'processing') expect(started).toEqual([buffered, after]);
    else expect(afterLog).toEqual([{ what: 'insert', status: 'queued' }, { what: 'claim', status: 'processing' }]);
  });

  it('an eagerly started job is cancelled, and retried from a claim, like any claimed job', async () => {
    const held = await queue.enqueue<Payload>('eager', { tag: 'cancel-me', mode: 'hold' });
    await waitFor('the job running', async () => holds.has('cancel-me'));
    expect(await queue.cancel(held)).toBe('cancelled');
    await finished(held, 'cancelled');
    expect(await runs(held)).toHaveLength(1);

    const retried = await queue.enqueue<Payload>('eager', { tag: 'retry-me', mode: 'fail-once' });
    await finished(retried);
    expect((await runs(retried)).map((r) => [r.attempt, r.fence_token])).toEqual([
      [1, '1'],
      [2, '2'],
    ]);
    expect(await log(retried)).toEqual([
      { what: 'insert', status: 'processing' },
      { what: 'claim', status: 'processing' },
    ]);
  });

  it('a refused insert fails the enqueue, stores nothing and keeps no slot', async () => {
    await expect(queue.enqueue<Payload>('eager', { tag: 'refused' })).rejects.toThrow(/this payload is refused/);
    expect((await db.query(`SELECT 1 FROM background_jobs WHERE payload ->> 'tag' = 'refused'`)).rowCount).toBe(0);
    // Both slots of the queue still start jobs eagerly.
    const a = await queue.enqueue<Payload>('eager', { tag: 'slot-a', mode: 'hold' });
    await waitFor('a running', async () => holds.has('slot-a'));
    const b = await queue.enqueue<Payload>('eager', { tag: 'slot-b', mode: 'hold' });
    await waitFor('b running', async () => holds.has('slot-b'));
    expect(await log(a)).toEqual([{ what: 'insert', status: 'processing' }]);
    expect(await log(b)).toEqual([{ what: 'insert', status: 'processing' }]);
    release('slot-a');
    release('slot-b');
    await finished(a);
    await finished(b);
  });

  it('many concurrent enqueues: at most `concurrency` start eagerly at once, every job runs once', async () => {
    // The two slots free (the previous test's outcomes written, no claim in flight), so that the burst's first two
    // calls keep them; those two at a higher priority, so that none of the burst's jobs queued before their
    // inserts run outranks them (an eager insert claims only where a claim would have). Both once happened on a
    // loaded machine, and no job of the burst started eagerly.
    // The probe reads no table: from its last check to the burst's first calls only microtasks run, no claim can start.
    const pool = ctx.app.get(WorkerPool);
    await waitFor('both slots free for eager starts', async () => pool.activeCounts().eager === 0 && pool.eagerWorker('eager') !== undefined && pool.claimLoops().every((l) => l.claimingForMs === 0), 10_000, 2);
    const tags = Array.from({ length: 60 }, (_, i) => `burst-${i}`);
    const ids = await Promise.all(tags.map((tag, i) => queue.enqueue<Payload>('eager', { tag }, { priority: i < 2 ? 1 : 0 })));
    for (const id of ids) await finished(id);
    const { rows } = await db.query<{ id: string; runs: number; eager: boolean }>(
      `SELECT j.id::text, (SELECT count(*)::int FROM eager_runs r WHERE r.job_id = j.id) AS runs,
              EXISTS (SELECT 1 FROM eager_log l WHERE l.job_id = j.id AND l.what = 'insert' AND l.status = 'processing') AS eager
       FROM background_jobs j WHERE j.id = ANY($1::int8[])`,
      [ids],
    );
    expect(rows.every((r) => r.runs === 1)).toBe(true);
    const eager = new Map(rows.map((r) => [r.id, r.eager]));
    expect([eager.get(ids[0]), eager.get(ids[1])]).toEqual([true, true]);
    // Never more running at once than the queue's concurrency (2), eager starts and claims together.
    expect(peak.get('eager')).toBe(2);
  });
});

describe('eagerStart option', () => {
  it('is on by default, off on queues with limits or of batches, and refused when asked for there', () => {
    expect(resolveHandlerOptions('q').eagerStart).toBe(true);
    expect(resolveHandlerOptions('q', { eagerStart: false }).eagerStart).toBe(false);
    expect(resolveHandlerOptions('q', { globalConcurrency: 2 }).eagerStart).toBe(false);
    expect(resolveHandlerOptions('q', { batch: { size: 10 } }).eagerStart).toBe(false);
    expect(() => resolveHandlerOptions('q', { eagerStart: true, rateLimit: { max: 1, intervalMs: 1000 } })).toThrow(/eagerStart cannot be used with globalConcurrency, rateLimit, concurrencyPerKey or fairness/);
    expect(() => resolveHandlerOptions('q', { eagerStart: true, batch: { size: 10 } })).toThrow(/eagerStart cannot be used with batch/);
    expect(() => resolveHandlerOptions('q', { eagerStart: 'yes' as unknown as boolean })).toThrow(/eagerStart/);
  });
});
