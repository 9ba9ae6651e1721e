import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { JobStore } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { LIMIT_LOCK_IDLE_MS, beginWithQueueLock } from '../src/store/claim.sql.js';
import { SQL } from '../src/store/job.sql.js';
import { queueLockKey } from '../src/store/claim.store.js';
import { resolveHandlerOptions } from '../src/utils/resolve-options.js';
import { sqlPool, startApp } from './support/test-app.js';

const GLOBAL_3 = { globalConcurrency: 3, rateLimit: undefined };

describe('limits: options', () => {
  it('refuse bad values at boot, naming the queue and the option', () => {
    expect(() => resolveHandlerOptions('q', { globalConcurrency: 0 })).toThrow(`Invalid @JobHandler('q') option globalConcurrency=0: expected an integer from 1 to 1000000.`);
    expect(() => resolveHandlerOptions('q', { rateLimit: 5 as never })).toThrow(`Invalid @JobHandler('q') option rateLimit=5: expected { max, intervalMs }.`);
    expect(() => resolveHandlerOptions('q', { rateLimit: { max: 10 } as never })).toThrow(`option rateLimit.intervalMs=null: expected an integer from 1 to 86400000.`);
    expect(() => resolveHandlerOptions('q', { rateLimit: { max: 1, intervalMs: 10, burst: 3 } as never })).toThrow(`Unknown @JobHandler('q') rateLimit option "burst"`);
    expect(() => resolveHandlerOptions('q', { globalConcurrency: 2, prefetch: 10 })).toThrow(/@JobHandler\('q'\) sets prefetch with a limit across instances/);
    expect(resolveHandlerOptions('q', { globalConcurrency: 2, rateLimit: { max: 5, intervalMs: 1_000 } })).toMatchObject({
      globalConcurrency: 2,
      rateLimit: { max: 5, intervalMs: 1_000 },
    });
    expect(resolveHandlerOptions('q', {})).toMatchObject({ globalConcurrency: undefined, rateLimit: undefined });
  });
});

describe('limits: the claim of a limited queue', () => {
  let app: INestApplicationContext;
  let db: pg.Pool;
  let store: JobStore;
  let queue: QueueService;
  let url: string;

  beforeAll(async () => {
    url = await createTestDatabase('limits');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    store = app.get(JobStore);
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  const running = async (q: string) =>
    (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = $1 AND status = 'processing'`, [q])).rows[0].n;

  it('(first, on an empty table) a plain job costs nothing new: no entry in the limits indexes, the same claim statement', async () => {
    await queue.enqueueMany(Array.from({ length: 200 }, (_, i) => ({ queue: 'plain', payload: { i } })));
    expect((await store.claimJobs('plain', 200, 'w', 30_000)).jobs).toHaveLength(200);
    // An empty B-tree is its metapage alone; one entry adds a leaf page.
    const { rows } = await db.query(
      `SELECT pg_relation_size('background_jobs_limited_idx') AS limited, pg_relation_size('background_jobs_key_claim_idx') AS keyed, current_setting('block_size') AS page`,
    );
    expect(rows[0].limited).toBe(rows[0].page);
    expect(rows[0].keyed).toBe(rows[0].page);
    expect(SQL.claimJobs).not.toMatch(/limited|concurrency_key|advisory/);
  });

  it('concurrencyKey at enqueue: stored when given (enqueue, enqueueMany mixed and uniform), refused when malformed with nothing stored', async () => {
    const one = await queue.enqueue('ck', { a: 1 }, { concurrencyKey: 'tenant:1' });
    const mixed = await queue.enqueueMany([
      { queue: 'ck', payload: {}, concurrencyKey: 'tenant:2' },
      { queue: 'ck', payload: {} },
      { queue: 'ck', payload: {}, priority: 3, concurrencyKey: 'tenant:3' },
    ]);
    const uniform = await queue.enqueueMany([{ queue: 'ck', payload: {}, concurrencyKey: 'tenant:4' }, { queue: 'ck', payload: {}, concurrencyKey: 'tenant:4' }]);
    const { rows } = await db.query(`SELECT id::text, concurrency_key AS k FROM background_jobs WHERE queue_name = 'ck' ORDER BY id`);
    expect(rows).toEqual([one, ...mixed, ...uniform].map((id, i) => ({ id, k: ['tenant:1', 'tenant:2', null, 'tenant:3', 'tenant:4', 'tenant:4'][i] })));
    expect((await queue.get(one))?.concurrencyKey).toBe('tenant:1');
    await expect(queue.enqueue('ck', {}, { concurrencyKey: '' })).rejects.toThrow(
      'Invalid enqueue("ck") option concurrencyKey="": expected a non-empty string of at most 512 characters, without NUL or a lone UTF-16 surrogate.',
    );
    await expect(queue.enqueueMany([{ queue: 'ck', payload: {} }, { queue: 'ck', payload: {}, concurrencyKey: 42 as never }])).rejects.toThrow(
      'enqueueMany: job #1: Invalid enqueue("ck") option concurrencyKey=42',
    );
    expect((await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'ck'`)).rows[0].n).toBe(6);
  });

  it('twelve claimers racing on their own connections take 3 jobs in all', async () => {
    await queue.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ queue: 'race', payload: { i } })));
    // One JobStore per connection pool: the claims really run at once, each in its own transaction.
    const pools = Array.from({ length: 12 }, () => new pg.Pool({ connectionString: url, max: 1 }));
    try {
      const results = await Promise.all(pools.map((p, i) => new JobStore(p).claimLimitedJobs('race', 5, `w${i}`, 30_000, GLOBAL_3)));
      expect(results.flatMap((r) => r.jobs)).toHaveLength(3);
      expect(results.filter((r) => r.jobs.length === 0 && r.atCapacity !== true)).toEqual([]);
      expect(await running('race')).toBe(3);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('a claimer frozen while it holds the queue lock stalls the queue for LIMIT_LOCK_IDLE_MS at most', async () => {
    await queue.enqueueMany([{ queue: 'frozen-lock', payload: {} }]);
    const frozen = new pg.Client({ connectionString: url });
    frozen.on('error', () => undefined); // its session is ended by the server
    await frozen.connect();
    // The claim's first round trip, with the real key; then nothing, as from a process stopped right there.
    await frozen.query(beginWithQueueLock(queueLockKey('frozen-lock')));
    const t0 = Date.now();
    const claimed = await store.claimLimitedJobs('frozen-lock', 1, 'w', 30_000, GLOBAL_3);
    const waited = Date.now() - t0;
    expect(claimed.jobs).toHaveLength(1);
    expect(waited).toBeGreaterThanOrEqual(LIMIT_LOCK_IDLE_MS - 200);
    expect(waited).toBeLessThan(LIMIT_LOCK_IDLE_MS + 3_000);
    await frozen.end().catch(() => undefined);
  });

  it('a stale worker cannot free a slot twice: its late outcome after a sweep and a new claim is fenced out', async () => {
    const [id] = await queue.enqueueMany([{ queue: 'stale', payload: {} }]);
    const limit1 = { globalConcurrency: 1, rateLimit: undefined };
    const a = await store.claimLimitedJobs('stale', 1, 'frozen', 1_000, limit1);
    expect(a.jobs.map((j) => j.id)).toEqual([id]);
    expect((await store.claimLimitedJobs('stale', 1, 'other', 1_000, limit1)).atCapacity).toBe(false); // full, but nothing waits: sleep until NOTIFY
    await queue.enqueueMany([{ queue: 'stale', payload: {}, priority: -1 }]); // after the swept job
    expect((await store.claimLimitedJobs('stale', 1, 'other', 1_000, limit1)).atCapacity).toBe(true); // full while a job waits: look again soon
    // The frozen worker's lease runs out; the sweeper puts the job back; another worker takes the slot.
    await db.query(`UPDATE background_jobs SET lease_expires_at = now() - interval '1 s' WHERE id = $1`, [id]);
    expect((await store.rescueExpiredLeases()).requeued).toBe(1);
    const b = await store.claimLimitedJobs('stale', 1, 'other', 30_000, limit1);
    expect(b.jobs.map((j) => j.id)).toEqual([id]);
    // The frozen worker wakes and settles: refused; the slot stays taken by the live attempt.
    expect(await store.completeJobs('frozen', a.jobs)).toEqual(new Set([id]));
    expect(await store.failJobs('frozen', [{ ...a.jobs[0], error: 'late', retryDelayMs: 0 }])).toEqual(new Map());
    expect((await store.claimLimitedJobs('stale', 1, 'third', 30_000, limit1)).jobs).toHaveLength(0);
    expect(await store.completeJobs('other', b.jobs)).toEqual(new Set());
    expect((await store.claimLimitedJobs('stale', 1, 'third', 30_000, limit1)).jobs).toHaveLength(1);
  });

  it('per key: one job per key at a time, oldest first; a key with a backlog takes its turn like the others', async () => {
    const perKey1 = { globalConcurrency: undefined, rateLimit: undefined, concurrencyPerKey: 1 };
    await queue.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ queue: 'keys', payload: { i }, concurrencyKey: 'big' })));
    for (const key of ['t1', 't2', 't3', 't4']) {
      await queue.enqueueMany(Array.from({ length: 3 }, (_, i) => ({ queue: 'keys', payload: { key, i }, concurrencyKey: key })));
    }
    await queue.enqueue('keys', { keyless: true });
    const first = await store.claimLimitedJobs('keys', 10, 'w', 30_000, perKey1);
    const claimedKeys = async (ids: string[]) =>
      (await db.query(`SELECT concurrency_key AS k, payload FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id`, [ids])).rows;
    expect(await claimedKeys(first.jobs.map((j) => j.id))).toEqual([
      { k: 'big', payload: { i: 0 } },
      { k: 't1', payload: { key: 't1', i: 0 } },
      { k: 't2', payload: { key: 't2', i: 0 } },
      { k: 't3', payload: { key: 't3', i: 0 } },
      { k: 't4', payload: { key: 't4', i: 0 } },
      { k: null, payload: { keyless: true } },
    ]);
    expect(first.keyCursor).toBe('t4');
    const none = await store.claimLimitedJobs('keys', 10, 'w', 30_000, perKey1, first.keyCursor);
    expect(none.jobs).toHaveLength(0);
    expect(none.atCapacity).toBe(true); // keyed jobs run: a slot frees when one ends
    // t2's job ends: t2's next job, in order, and nothing else.
    const t2 = first.jobs[2];
    expect(await store.completeJobs('w', [t2])).toEqual(new Set());
    const next = await store.claimLimitedJobs('keys', 10, 'w', 30_000, perKey1, none.keyCursor);
    expect(await claimedKeys(next.jobs.map((j) => j.id))).toEqual([{ k: 't2', payload: { key: 't2', i: 1 } }]);
    expect(next.keyCursor).toBe('t2');
    // Two per key, with the cursor at t2: t3 and t4 fill the claim; big and t1 come after the turn wraps.
    expect(await store.completeJobs('w', [...first.jobs.filter((j) => j !== t2), ...next.jobs])).toEqual(new Set());
    const two = await store.claimLimitedJobs('keys', 4, 'w', 30_000, { ...perKey1, concurrencyPerKey: 2 }, next.keyCursor);
    expect((await claimedKeys(two.jobs.map((j) => j.id))).map((r) => r.k)).toEqual(['t3', 't3', 't4', 't4']);
    expect(two.keyCursor).toBe('t4');
  });

  it('per key and fair: a claim that does not look for jobs without a key leaves them; one that looks says whether it found any', async () => {
    const perKey = { globalConcurrency: undefined, rateLimit: undefined, concurrencyPerKey: 5 };
    const fair = { ...perKey, concurrencyPerKey: undefined, fairness: { weights: {}, defaultWeight: 1 } };
    for (const [q, limits] of [['look-keyed', perKey], ['look-fair', fair]] as const) {
      await queue.enqueueMany([{ queue: q, payload: { k: 1 }, concurrencyKey: 'a' }, { queue: q, payload: { keyless: 1 } }]);
      const keyedOnly = async (ids: string[]) => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND concurrency_key IS NULL`, [ids])).rows[0].n;
      const blind = await store.claimLimitedJobs(q, 10, 'w', 30_000, limits, '', false, 'fifo', false);
      expect(blind.jobs).toHaveLength(1);
      expect(await keyedOnly(blind.jobs.map((j) => j.id))).toBe(0);
      expect(blind.keylessSeen).toBeUndefined();
      const looked = await store.claimLimitedJobs(q, 10, 'w', 30_000, limits, blind.keyCursor, false, 'fifo', true);
      expect(looked.jobs).toHaveLength(1);
      expect(await keyedOnly(looked.jobs.map((j) => j.id))).toBe(1);
      expect(looked.keylessSeen).toBe(true);
      await queue.enqueue(q, { k: 2 }, { concurrencyKey: 'b' });
      const after = await store.claimLimitedJobs(q, 10, 'w', 30_000, limits, looked.keyCursor, false, 'fifo', true);
      expect(after.jobs).toHaveLength(1);
      expect(after.keylessSeen).toBe(false);
    }
  });

  it('fair alone reads ahead: the first jobs in pass order start, the rest are held (uncharged, short lease), and every one moves the passes', async () => {
    const fair = { globalConcurrency: undefined, rateLimit: undefined, concurrencyPerKey: undefined, fairness: { weights: { a: 3 }, defaultWeight: 1 } };
    await queue.enqueueMany(['a', 'b'].flatMap((k) => Array.from({ length: 6 }, (_, i) => ({ queue: 'fair-ahead', payload: { k, i }, concurrencyKey: k }))));
    const claim = await store.claimLimitedJobs('fair-ahead', 8, 'w', 30_000, fair, '', false, 'fifo', true, { startNow: 3, bufferLeaseMs: 2_000 });
    // In pass order: a (weight 3) at 1/3, 2/3, 1, 4/3, ...; b at 1, 2: three of a's for each of b's.
    const { rows } = await db.query<{ id: string; k: string; attempts: number; buffered: boolean; lease_s: number }>(
      `SELECT id::text, concurrency_key AS k, attempts, buffered, round(extract(epoch FROM lease_expires_at - now()))::int AS lease_s
       FROM background_jobs WHERE id = ANY($1::int8[])`,
      [claim.jobs.map((j) => j.id)],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    const claimed = claim.jobs.map((j) => ({ k: byId.get(j.id)!.k, buffered: j.buffered, attempts: byId.get(j.id)!.attempts, lease_s: byId.get(j.id)!.lease_s }));
    expect(claimed.map((c) => c.buffered)).toEqual([false, false, false, true, true, true, true, true]);
    expect(claimed.filter((c) => c.buffered).every((c) => c.attempts === 0 && c.lease_s <= 2)).toBe(true);
    expect(claimed.filter((c) => !c.buffered).every((c) => c.attempts === 1 && c.lease_s >= 29)).toBe(true);
    expect(claimed.filter((c) => c.k === 'a')).toHaveLength(6);
    expect(claimed.filter((c) => c.k === 'b')).toHaveLength(2);
    const { rows: passes } = await db.query<{ key: string; pass: number }>(`SELECT key, pass FROM background_fair_passes WHERE queue_name = 'fair-ahead' ORDER BY key`);
    expect(passes.map((p) => [p.key, Math.round(p.pass * 3) / 3])).toEqual([['a', 1], ['b', 1]]);
  });

  it('rate limit: a full window says how long until the next start, by the database clock', async () => {
    await queue.enqueueMany(Array.from({ length: 10 }, (_, i) => ({ queue: 'rate', payload: { i } })));
    const limits = { globalConcurrency: undefined, rateLimit: { max: 4, intervalMs: 2_000 } };
    const first = await store.claimLimitedJobs('rate', 3, 'w', 30_000, limits);
    expect(first.jobs).toHaveLength(3);
    const second = await store.claimLimitedJobs('rate', 3, 'w', 30_000, limits);
    expect(second.jobs).toHaveLength(1);
    expect(second.rateWaitMs).toBeGreaterThan(1_500);
    expect(second.rateWaitMs).toBeLessThanOrEqual(2_000);
    const third = await store.claimLimitedJobs('rate', 3, 'w', 30_000, limits);
    expect(third.jobs).toHaveLength(0);
    // Window entries older than the interval are deleted by the claims themselves.
    await db.query(`UPDATE background_queue_starts SET started_at = started_at - interval '2 s' WHERE queue_name = 'rate'`);
    expect((await store.claimLimitedJobs('rate', 3, 'w', 30_000, limits)).jobs).toHaveLength(3);
    const { rows } = await db.query(`SELECT n FROM background_queue_starts WHERE queue_name = 'rate'`);
    expect(rows).toEqual([{ n: 3 }]);
  });

});
