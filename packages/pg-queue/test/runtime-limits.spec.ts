import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { PgQueueError, QueueService } from 'nestjs-pg-queue';
import { JobStore } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { effectiveLimits } from '../src/limits/queue-limits.js';
import { resolveHandlerOptions } from '../src/utils/resolve-options.js';
import { sqlPool, startApp } from './support/test-app.js';

// Limits changed at runtime (issue 42, part 2): what setQueueLimits accepts and stores, what getQueueLimits reports,
// the adaptive backoff of a partner's 429, and the claims' respect of the blocks, on a real PostgreSQL.

describe('runtime limits: options and pure rules', () => {
  it('refuses a bad rateLimitedBackoff at boot, naming the queue and the option', () => {
    expect(() => resolveHandlerOptions('q', { rateLimitedBackoff: { maxMs: 0 } })).toThrow(`Invalid @JobHandler('q') option rateLimitedBackoff.maxMs=0: expected an integer from 1 to 86400000.`);
    expect(() => resolveHandlerOptions('q', { rateLimitedBackoff: 5 as never })).toThrow(`Invalid @JobHandler('q') option rateLimitedBackoff=5: expected { maxMs }.`);
    expect(() => resolveHandlerOptions('q', { rateLimitedBackoff: { maxMs: 10, factor: 3 } as never })).toThrow(/rateLimitedBackoff option "factor"/);
    expect(resolveHandlerOptions('q', {}).rateLimitedBackoff).toEqual({ maxMs: 300_000 });
  });

  it('applies the stored overrides over the decorator: absent keeps it, null removes the limit', () => {
    const defaults = { concurrency: 4, globalConcurrency: 3, rateLimit: undefined, concurrencyPerKey: 1 };
    expect(effectiveLimits(defaults, null)).toEqual(defaults);
    expect(effectiveLimits(defaults, { concurrency: 1, globalConcurrency: null, rateLimit: { max: 5, intervalMs: 100 } })).toEqual({
      concurrency: 1,
      globalConcurrency: undefined,
      rateLimit: { max: 5, intervalMs: 100 },
      concurrencyPerKey: 1,
    });
  });
});

describe('runtime limits: the queue\'s row', () => {
  let app: INestApplicationContext;
  let db: pg.Pool;
  let store: JobStore;
  let queue: QueueService;

  beforeAll(async () => {
    const url = await createTestDatabase('rtlimitsrow');
    db = sqlPool(url);
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    store = app.get(JobStore);
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  const stored = async (name: string) => (await db.query<{ limits: unknown }>(`SELECT limits FROM background_queues WHERE queue_name = $1`, [name])).rows[0]?.limits ?? null;

  it('refuses bad input with a message naming the problem, and stores nothing', async () => {
    const bad: [unknown, string | RegExp][] = [
      [{ globalConcurrency: 0 }, `setQueueLimits('q'): globalConcurrency must be an integer from 1 to 1000000, 'none' or null (the decorator's); got 0.`],
      [{ concurrency: 'none' }, /concurrency cannot be 'none'/],
      [{ concurrency: 1.5 }, /concurrency must be an integer from 1 to 10000 or null/],
      [{ rateLimit: { max: 10 } }, /rateLimit must be \{ max: 1 to 1000000, intervalMs: 1 to 86400000 \}, 'none' or null \(the decorator's\); got \{"max":10\}/],
      [{ rateLimit: { max: 1, intervalMs: 10, burst: 2 } }, /rateLimit must be/],
      [{ concurrencyPerKey: '2' }, /concurrencyPerKey must be an integer/],
      [{ globalConcurrecy: 2 }, `setQueueLimits('q'): unknown limit "globalConcurrecy"; known limits: concurrency, globalConcurrency, rateLimit, concurrencyPerKey.`],
      [{}, /no limit to change/],
      [null, /expected an object of limits, got null/],
      // one good value beside a bad one: nothing of the call is stored
      [{ concurrency: 2, globalConcurrency: -1 }, /globalConcurrency must be/],
    ];
    for (const [change, message] of bad) {
      const call = queue.setQueueLimits('q', change as never);
      await expect(call).rejects.toThrow(PgQueueError);
      await expect(queue.setQueueLimits('q', change as never)).rejects.toThrow(message);
    }
    expect(await stored('q')).toBeNull();
    await expect(queue.setQueueLimits('no such queue!', { concurrency: 1 })).rejects.toThrow(/Invalid queue name/);
  });

  it('stores what is set, clears what is null, and says where each limit comes from', async () => {
    const set = await queue.setQueueLimits('r', { globalConcurrency: 2, rateLimit: { max: 5, intervalMs: 1_000 }, concurrencyPerKey: 'none' });
    expect(await stored('r')).toEqual({ globalConcurrency: 2, rateLimit: { max: 5, intervalMs: 1_000 }, concurrencyPerKey: null });
    // No handler of "r" in this process: the decorator's values are unknown here.
    expect(set).toEqual({
      queue: 'r',
      concurrency: { value: undefined, source: 'decorator' },
      globalConcurrency: { value: 2, source: 'database' },
      rateLimit: { value: { max: 5, intervalMs: 1_000 }, source: 'database' },
      concurrencyPerKey: { value: 'none', source: 'database' },
      blockedForMs: 0,
      keysBlockedForMs: 0,
    });
    await queue.setQueueLimits('r', { rateLimit: null, concurrency: 3 });
    expect(await stored('r')).toEqual({ globalConcurrency: 2, concurrencyPerKey: null, concurrency: 3 });
    await queue.setQueueLimits('r', { globalConcurrency: null, concurrencyPerKey: null, concurrency: null });
    expect(await stored('r')).toBeNull();
    // A paused queue keeps its pause through a change of limits (one row).
    await queue.pause('r');
    await queue.setQueueLimits('r', { concurrency: 2 });
    expect(await queue.pausedQueues()).toContain('r');
  });

  it('grows the block of repeated 429s without a success between, up to maxMs, and starts again after one', async () => {
    const backoff = async () => (await db.query<{ ms: number }>(`SELECT rate_backoff_ms AS ms FROM background_queues WHERE queue_name = 'b'`)).rows[0].ms;
    const lapse = () => db.query(`UPDATE background_queues SET blocked_until = now() - interval '1 ms' WHERE queue_name = 'b'`);
    expect(await store.blockQueue('b', 100, 350)).toBeGreaterThan(90);
    expect(await backoff()).toBe(100);
    // A 429 while the block holds came from a job started before it: no growth.
    await store.blockQueue('b', 100, 350);
    expect(await backoff()).toBe(100);
    await lapse();
    await store.blockQueue('b', 100, 350);
    expect(await backoff()).toBe(200);
    await lapse();
    await store.blockQueue('b', 100, 350);
    expect(await backoff()).toBe(350); // bounded
    await lapse();
    await store.blockQueue('b', 1_000, 350);
    expect(await backoff()).toBe(1_000); // never below what the partner asked
    await lapse();
    await store.resetBackoff('b');
    expect(await backoff()).toBeNull();
    await store.blockQueue('b', 100, 350);
    expect(await backoff()).toBe(100);
    // A key's block: its own row, and the queue's key_blocked_until for the plain claim's probe.
    await store.blockQueue('b', 300, 1_000, 'tenant-1');
    const { rows } = await db.query(`SELECT concurrency_key, backoff_ms FROM background_queue_key_blocks WHERE queue_name = 'b'`);
    expect(rows).toEqual([{ concurrency_key: 'tenant-1', backoff_ms: 300 }]);
    expect((await store.queueSettings(['b']))[0]).toMatchObject({ backoff: true });
    expect((await store.queueSettings(['b']))[0].keyBlockedMs).toBeGreaterThan(200);
  });

  it('claims nothing of a blocked queue; with a key blocked, the plain claim takes nothing and its variant skips only that key', async () => {
    await queue.enqueueMany([
      { queue: 'c', payload: 1, concurrencyKey: 'x' },
      { queue: 'c', payload: 2, concurrencyKey: 'y' },
      { queue: 'c', payload: 3 },
    ]);
    await store.blockQueue('c', 60_000, 60_000);
    expect((await store.claimJobs('c', 10, 'w', 30_000)).jobs).toHaveLength(0);
    expect((await store.claimLimitedJobs('c', 10, 'w', 30_000, { globalConcurrency: 5, rateLimit: undefined })).jobs).toHaveLength(0);
    expect((await store.claimLimitedJobs('c', 10, 'w', 30_000, { globalConcurrency: 5, rateLimit: undefined, concurrencyPerKey: 1 })).jobs).toHaveLength(0);
    await db.query(`UPDATE background_queues SET blocked_until = NULL WHERE queue_name = 'c'`);
    await store.blockQueue('c', 60_000, 60_000, 'x');
    expect((await store.claimJobs('c', 10, 'w', 30_000)).jobs).toHaveLength(0);
    const claimed = await store.claimJobs('c', 10, 'w', 30_000, false, undefined, true);
    expect(claimed.jobs.map((j) => j.payload).sort()).toEqual([2, 3]);
  });

  it("a claim or eager insert sent with a copy of the stored limits that is not the row's takes nothing (simulation seed 1998548486)", async () => {
    // A worker that still believed no limit was stored (its copy: null) claimed with the plain claim, beside the limited
    // claims of the processes that had read the new limit: two jobs ran at once under a global concurrency of 1.
    await queue.enqueueMany([1, 2, 3].map((n) => ({ queue: 'st', payload: n, concurrencyKey: `k${n}` })));
    await queue.setQueueLimits('st', { globalConcurrency: 1 });
    const [{ text }] = (await db.query<{ text: string }>(`SELECT limits::text AS text FROM background_queues WHERE queue_name = 'st'`)).rows;
    const plain = (copy: string | null) => store.claimJobs('st', 10, 'w', 30_000, false, undefined, false, 'fifo', copy);
    const limited = (copy: string | null, more = {}) => store.claimLimitedJobs('st', 10, 'w', 30_000, { globalConcurrency: 1, rateLimit: undefined, ...more }, '', false, 'fifo', true, undefined, copy);
    const stale = JSON.stringify({ globalConcurrency: 5 });
    expect((await plain(null)).jobs).toHaveLength(0);
    expect((await plain(stale)).jobs).toHaveLength(0);
    expect((await limited(null)).jobs).toHaveLength(0);
    expect((await limited(null, { concurrencyPerKey: 1 })).jobs).toHaveLength(0);
    expect((await limited(null, { fairness: { weights: {}, defaultWeight: 1 } })).jobs).toHaveLength(0);
    const row = { queue: 'st', payloadJson: '4', priority: 0, maxAttempts: 3 } as Parameters<JobStore['insertEagerJob']>[0];
    const eager = await store.insertEagerJob(row, { workerId: 'w', bufferLeaseMs: 5_000, leaseMs: 30_000, storedLimits: null });
    expect(eager.job).toBeUndefined();
    expect((await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [eager.id])).rows).toEqual([{ status: 'queued' }]);
    // Nothing was taken by the stale copies; the row's own text (as the keeper reads it: queueSettings) claims, within the limit.
    expect((await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'st' AND status = 'processing'`)).rows).toEqual([{ n: 0 }]);
    expect((await store.queueSettings(['st']))[0].limitsText).toBe(text);
    expect((await limited(text)).jobs).toHaveLength(1);
    expect((await limited(text)).jobs).toHaveLength(0); // at the limit
    // A queue with nothing stored: null is the copy that matches (the row absent, or its limits NULL).
    await queue.enqueue('st-none', 1);
    expect((await store.claimJobs('st-none', 10, 'w', 30_000, false, undefined, false, 'fifo', stale)).jobs).toHaveLength(0);
    expect((await store.claimJobs('st-none', 10, 'w', 30_000, false, undefined, false, 'fifo', null)).jobs).toHaveLength(1);
  });

  it('with a key blocked, the keyed and the fair claims skip only that key; once every block has passed, they skip none', async () => {
    const keyed = { globalConcurrency: undefined, rateLimit: undefined, concurrencyPerKey: 5 };
    const fair = { globalConcurrency: undefined, rateLimit: undefined, fairness: { weights: {}, defaultWeight: 1 } };
    for (const [name, limits] of [['kb-keyed', keyed], ['kb-fair', fair]] as const) {
      const payloads = (jobs: { payload: unknown }[]) => jobs.map((j) => j.payload).sort();
      await queue.enqueueMany([1, 2, 3].map((n) => ({ queue: name, payload: n, concurrencyKey: n === 1 ? 'x' : `k${n}` })));
      await store.blockQueue(name, 60_000, 60_000, 'x');
      // The claims probe a key's block only while the queue's row says some key is blocked (key_blocked_until).
      expect(payloads((await store.claimLimitedJobs(name, 10, 'w', 30_000, limits)).jobs)).toEqual([2, 3]);
      await db.query(`UPDATE background_queue_key_blocks SET blocked_until = now() - interval '1 second' WHERE queue_name = $1`, [name]);
      await db.query(`UPDATE background_queues SET key_blocked_until = now() - interval '1 second' WHERE queue_name = $1`, [name]);
      expect(payloads((await store.claimLimitedJobs(name, 10, 'w', 30_000, limits)).jobs)).toEqual([1]);
    }
  });

  it("a claim holds the row's globalConcurrency, not the worker's copy of it (a process whose notice was lost)", async () => {
    // The simulation's seed 659653567: a change from 4 to 1, a process that had not read it yet claimed under 4. Its claims
    // now take nothing at all while its copy of the stored limits is not the row's (the test above); the row's
    // globalConcurrency holds over the limits the claim is given all the same.
    await queue.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ queue: 'g', payload: i })));
    await db.query(`INSERT INTO background_queues (queue_name, limits) VALUES ('g', '{"globalConcurrency": 1}')`); // no NOTIFY: nobody heard
    const copy = async () => (await store.queueSettings(['g']))[0].limitsText;
    const stale = { globalConcurrency: 4, rateLimit: undefined };
    expect((await store.claimLimitedJobs('g', 3, 'w', 30_000, stale)).jobs).toHaveLength(0); // its copy: none stored
    expect((await store.claimLimitedJobs('g', 3, 'w', 30_000, stale, '', false, 'fifo', true, undefined, await copy())).jobs).toHaveLength(1);
    expect((await store.claimLimitedJobs('g', 3, 'w', 30_000, stale, '', false, 'fifo', true, undefined, await copy())).jobs).toHaveLength(0);
    // JSON null: no limit across instances, whatever the worker passes (and its jobs count against none).
    await db.query(`UPDATE background_queues SET limits = '{"globalConcurrency": null}' WHERE queue_name = 'g'`);
    expect((await store.claimLimitedJobs('g', 3, 'w', 30_000, { globalConcurrency: 1, rateLimit: undefined }, '', false, 'fifo', true, undefined, await copy())).jobs).toHaveLength(3);
    // Back to a number: the one limited job running leaves one slot of 2, whatever the worker passes.
    await db.query(`UPDATE background_queues SET limits = '{"globalConcurrency": 2}' WHERE queue_name = 'g'`);
    const nine = { globalConcurrency: 9, rateLimit: undefined };
    expect((await store.claimLimitedJobs('g', 3, 'w', 30_000, nine, '', false, 'fifo', true, undefined, await copy())).jobs).toHaveLength(1);
    expect((await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'g' AND status = 'processing' AND limited`)).rows[0].n).toBe(2);
    expect((await store.claimLimitedJobs('g', 3, 'w', 30_000, nine, '', false, 'fifo', true, undefined, await copy())).jobs).toHaveLength(0);
  });
});
