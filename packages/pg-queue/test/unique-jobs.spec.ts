import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { DataSource } from 'typeorm';
import { JobHandler, PgQueueError, QueueService, type Job } from 'nestjs-pg-queue';
import { MaintenanceScheduler } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

/** The 'slow' handler waits for the test to let it finish. */
const release = new Map<string, () => void>();
const started: string[] = [];

@Injectable()
class Handlers {
  @JobHandler('slow')
  async slow(job: Job) {
    started.push(job.id);
    await new Promise<void>((resolve) => release.set(job.id, resolve));
  }

  @JobHandler('quick')
  async quick() {}

  @JobHandler('failing', { maxAttempts: 1 })
  async failing() {
    throw new Error('boom');
  }
}

const ENQUEUE_ONLY = { workers: false, migrationsRun: false, maintenance: { enabled: false } } as const;

describe('unique jobs', () => {
  let url: string;
  let app: INestApplicationContext;
  let queue: QueueService;
  let db: pg.Pool;

  beforeAll(async () => {
    url = await createTestDatabase('unique');
    db = sqlPool(url);
    app = await startApp(url, { providers: [Handlers], queue: { maintenance: { enabled: false, completedRetentionMs: 0 } } });
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    for (const resolve of release.values()) resolve();
    await app?.close();
    await db?.end();
  });

  const row = async (id: string) =>
    (await db.query(`SELECT status, payload, run_at, unique_key, priority FROM background_jobs WHERE id = $1`, [id])).rows[0];
  const count = async (queueName: string) => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = $1`, [queueName])).rows[0].n;

  it('keep (default): a second enqueue of a key adds nothing and returns the holder, which keeps its payload', async () => {
    const first = await queue.enqueueUnique('idle-a', { v: 1 }, { uniqueKey: 'k', delayMs: 60_000 });
    expect(first).toEqual({ id: expect.stringMatching(/^\d+$/), duplicate: false, replaced: false });
    const second = await queue.enqueueUnique('idle-a', { v: 2 }, { uniqueKey: 'k' });
    expect(second).toEqual({ id: first.id, duplicate: true, replaced: false });
    // enqueue() keeps returning an id: the holder's.
    expect(await queue.enqueue('idle-a', { v: 3 }, { uniqueKey: 'k' })).toBe(first.id);
    expect(await count('idle-a')).toBe(1);
    expect(await row(first.id)).toMatchObject({ status: 'queued', payload: { v: 1 }, unique_key: 'k' });
    expect(await queue.get(first.id)).toMatchObject({ uniqueKey: 'k' });
    // Another queue, or another key, is another job.
    expect((await queue.enqueueUnique('idle-b', { v: 1 }, { uniqueKey: 'k' })).duplicate).toBe(false);
    expect((await queue.enqueueUnique('idle-a', { v: 1 }, { uniqueKey: 'k2' })).duplicate).toBe(false);
  });

  it("replace (debounce): the queued holder takes the new payload and run_at", async () => {
    const first = await queue.enqueueUnique('idle-r', { v: 1 }, { uniqueKey: 'k', delayMs: 60_000 });
    const before = await row(first.id);
    const second = await queue.enqueueUnique('idle-r', { v: 2 }, { uniqueKey: 'k', onConflict: 'replace', delayMs: 3_600_000 });
    expect(second).toEqual({ id: first.id, duplicate: true, replaced: true });
    const after = await row(first.id);
    expect(after.payload).toEqual({ v: 2 });
    expect(after.run_at.getTime() - before.run_at.getTime()).toBeGreaterThan(3_000_000);
    expect(await count('idle-r')).toBe(1);
  });

  it('keep-run-at (throttle): the queued holder takes the new payload and keeps its run_at', async () => {
    const first = await queue.enqueueUnique('idle-t', { v: 1 }, { uniqueKey: 'k', delayMs: 60_000 });
    const before = await row(first.id);
    const second = await queue.enqueueUnique('idle-t', { v: 2 }, { uniqueKey: 'k', onConflict: 'keep-run-at', delayMs: 3_600_000 });
    expect(second).toEqual({ id: first.id, duplicate: true, replaced: true });
    const after = await row(first.id);
    expect(after.payload).toEqual({ v: 2 });
    expect(after.run_at).toEqual(before.run_at);
  });

  it('a running holder is never replaced: the call is a duplicate of it; once it completed the key is free', async () => {
    const first = await queue.enqueueUnique('slow', { v: 1 }, { uniqueKey: 'r' });
    await waitFor('holder running', async () => release.has(first.id));
    for (const onConflict of ['keep', 'replace', 'keep-run-at'] as const) {
      expect(await queue.enqueueUnique('slow', { v: 2 }, { uniqueKey: 'r', onConflict })).toEqual({ id: first.id, duplicate: true, replaced: false });
    }
    expect(await row(first.id)).toMatchObject({ status: 'processing', payload: { v: 1 } });
    release.get(first.id)!();
    // completedRetentionMs 0 deletes the row at completion; the key is free again.
    await waitFor('holder gone', async () => (await row(first.id)) === undefined);
    const next = await queue.enqueueUnique('slow', { v: 3 }, { uniqueKey: 'r' });
    expect(next.duplicate).toBe(false);
    expect(next.id).not.toBe(first.id);
    await waitFor('next running', async () => release.has(next.id));
    release.get(next.id)!();
  });

  it('a failed or cancelled job frees its key; retry() refuses while another job holds it', async () => {
    const failed = await queue.enqueueUnique('failing', {}, { uniqueKey: 'f' });
    await waitFor('dead-lettered', async () => (await row(failed.id))?.status === 'failed');
    const after = await queue.enqueueUnique('idle-f', {}, { uniqueKey: 'f' });
    expect(after.duplicate).toBe(false);
    // A new job of the same queue and key (delayed, so it does not run): retrying the failed one would make two holders.
    const holder = await queue.enqueueUnique('failing', {}, { uniqueKey: 'f', delayMs: 3_600_000 });
    expect(holder.duplicate).toBe(false);
    await expect(queue.retry(failed.id)).rejects.toThrow(
      `Cannot retry job ${failed.id}: another queued or running job holds its unique key; cancel that job first or wait for it to finish.`,
    );
    expect(await row(failed.id)).toMatchObject({ status: 'failed' });
    expect(await queue.cancel(holder.id)).toBe('cancelled');
    expect(await queue.retry(failed.id)).toBe(true);
  });

  it('enqueueMany with keys: one statement, each row’s outcome, duplicates within the call too', async () => {
    const existing = await queue.enqueueUnique('idle-m', { v: 0 }, { uniqueKey: 'a', delayMs: 60_000 });
    const results = await queue.enqueueManyUnique([
      { queue: 'idle-m', payload: { v: 1 }, uniqueKey: 'a' }, // duplicate of the job in the table
      { queue: 'idle-m', payload: { v: 2 }, uniqueKey: 'b' }, // new
      { queue: 'idle-m', payload: { v: 3 } }, // plain
      { queue: 'idle-m', payload: { v: 4 }, uniqueKey: 'b' }, // duplicate of row 2, same call
      { queue: 'idle-m', payload: { v: 5 }, uniqueKey: 'b', onConflict: 'replace' }, // replaces row 2's payload
      { queue: 'idle-m', payload: { v: 6 } }, // plain
      { queue: 'idle-m', payload: { v: 7 }, uniqueKey: 'a', onConflict: 'keep-run-at' }, // replaces the existing job's payload
    ]);
    const [a, b, plain1, b2, b3, plain2, a2] = results;
    expect(a).toEqual({ id: existing.id, duplicate: true, replaced: false });
    expect(b).toEqual({ id: expect.any(String), duplicate: false, replaced: false });
    expect(plain1.duplicate).toBe(false);
    expect(b2).toEqual({ id: b.id, duplicate: true, replaced: false });
    expect(b3).toEqual({ id: b.id, duplicate: true, replaced: true });
    expect(plain2.duplicate).toBe(false);
    expect(a2).toEqual({ id: existing.id, duplicate: true, replaced: true });
    expect(new Set([existing.id, b.id, plain1.id, plain2.id]).size).toBe(4);
    expect(await count('idle-m')).toBe(4);
    expect((await row(b.id)).payload).toEqual({ v: 5 });
    expect((await row(existing.id)).payload).toEqual({ v: 7 });
    expect((await row(plain1.id)).unique_key).toBeNull();
    // enqueueMany returns the ids alone, holders' ids for duplicates.
    expect(await queue.enqueueMany([{ queue: 'idle-m', payload: {}, uniqueKey: 'a' }, { queue: 'idle-m', payload: {} }])).toEqual([existing.id, expect.any(String)]);
  });

  it('with manager: the job commits or rolls back with the caller’s transaction', async () => {
    const ds = await new DataSource({ type: 'postgres', url }).initialize();
    try {
      await expect(
        ds.transaction(async (manager) => {
          await queue.enqueueUnique('idle-x', {}, { uniqueKey: 'tx', manager });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await count('idle-x')).toBe(0);
      const id = await ds.transaction((manager) => queue.enqueue('idle-x', {}, { uniqueKey: 'tx', manager }));
      expect(await queue.enqueueUnique('idle-x', {}, { uniqueKey: 'tx' })).toEqual({ id, duplicate: true, replaced: false });
    } finally {
      await ds.destroy();
    }
  });

  it('refuses bad input at enqueue, with nothing stored', async () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ uniqueKey: '' }, 'uniqueKey=""'],
      [{ uniqueKey: 'x'.repeat(256) }, 'uniqueKey='],
      [{ uniqueKey: 42 }, 'uniqueKey=42'],
      [{ uniqueKey: 'a\u0000b' }, 'uniqueKey='],
      // Lone surrogates: node-postgres writes each as U+FFFD, so 'a\ud800' and 'a\udc00' were one key.
      [{ uniqueKey: 'a\ud800' }, 'uniqueKey='],
      [{ uniqueKey: 'a\udc00b' }, 'uniqueKey='],
      [{ concurrencyKey: 'tenant-\ud83d' }, 'concurrencyKey='],
      [{ uniqueKey: 'k', uniqueForMs: -1 }, 'uniqueForMs=-1'],
      [{ uniqueKey: 'k', uniqueForMs: 1.5 }, 'uniqueForMs=1.5'],
      [{ uniqueKey: 'k', onConflict: 'merge' }, 'onConflict="merge"'],
      [{ uniqueKey: 'k', uniqueForMs: 1000, onConflict: 'replace' }, 'onConflict="replace"'],
      [{ onConflict: 'keep' }, 'onConflict="keep"'],
      [{ uniqueForMs: 1000 }, 'uniqueForMs=1000'],
    ];
    for (const [options, text] of bad) {
      await expect(queue.enqueue('idle-bad', {}, options)).rejects.toThrow(PgQueueError);
      await expect(queue.enqueue('idle-bad', {}, options)).rejects.toThrow(text);
      await expect(queue.enqueueMany([{ queue: 'idle-bad', payload: {}, uniqueKey: 'ok' }, { queue: 'idle-bad', payload: {}, ...options }])).rejects.toThrow(
        `enqueueMany: job #1: Invalid enqueue("idle-bad") option ${text}`,
      );
    }
    await expect(queue.enqueueUnique('idle-bad', {}, {} as { uniqueKey: string })).rejects.toThrow('needs a uniqueKey');
    expect(await count('idle-bad')).toBe(0);
  });

  it('a job without a key writes no entry in the unique index', async () => {
    await queue.enqueueMany(Array.from({ length: 2_000 }, (_, i) => ({ queue: 'idle-plain', payload: { i } })));
    for (let i = 0; i < 50; i++) await queue.enqueue('idle-plain', { i });
    // An empty btree is its metapage alone (plus an empty root page once something was in it).
    const { rows } = await db.query(`SELECT pg_relation_size('background_jobs_unique_key_idx')::int AS bytes, current_setting('block_size')::int AS page`);
    const { rows: entries } = await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE unique_key IS NOT NULL AND status IN ('queued', 'processing')`);
    expect(rows[0].bytes / rows[0].page).toBeLessThanOrEqual(1 + Math.ceil(entries[0].n / 100) + 1);
  });

  describe('uniqueForMs', () => {
    it('one job per key per window, even after the holder completed and was pruned; then the key is free again', async () => {
      const first = await queue.enqueueUnique('quick', { v: 1 }, { uniqueKey: 'w', uniqueForMs: 1_500 });
      expect(first.duplicate).toBe(false);
      // completedRetentionMs 0: the row is deleted at completion.
      await waitFor('holder completed and deleted', async () => (await row(first.id)) === undefined);
      await app.get(MaintenanceScheduler).pruner.runOnce();
      expect(await queue.enqueueUnique('quick', { v: 2 }, { uniqueKey: 'w', uniqueForMs: 1_500 })).toEqual({ id: first.id, duplicate: true, replaced: false });
      // A live key of the same name is a separate key (held by queued or running jobs only).
      expect((await queue.enqueueUnique('idle-w', {}, { uniqueKey: 'w' })).duplicate).toBe(false);
      await new Promise((r) => setTimeout(r, 1_600));
      const next = await queue.enqueueUnique('quick', { v: 3 }, { uniqueKey: 'w', uniqueForMs: 1_500 });
      expect(next.duplicate).toBe(false);
      expect(next.id).not.toBe(first.id);
    });

    it('the pruner deletes windows that ended, and only those', async () => {
      await queue.enqueueMany([
        { queue: 'idle-wp', payload: {}, uniqueKey: 'short', uniqueForMs: 1 },
        { queue: 'idle-wp', payload: {}, uniqueKey: 'long', uniqueForMs: 3_600_000 },
        { queue: 'idle-wp', payload: {}, uniqueKey: 'long', uniqueForMs: 3_600_000 },
      ]);
      expect(await count('idle-wp')).toBe(2);
      await new Promise((r) => setTimeout(r, 20));
      expect(await app.get(MaintenanceScheduler).pruner.pruneExpiredKeys()).toBeGreaterThanOrEqual(1);
      const { rows } = await db.query(`SELECT unique_key FROM background_job_keys WHERE queue_name = 'idle-wp'`);
      expect(rows).toEqual([{ unique_key: 'long' }]);
    });
  });

  describe('a holder committed while the enqueue waited for it', () => {
    // The enqueue's INSERT waits for the open transaction's row of the same key; once that commits, the
    // conflict is found but the row is invisible to the statement's snapshot: the store asks again.
    const withOpenHolder = async (key: string, end: 'COMMIT' | 'ROLLBACK', enqueue: () => Promise<unknown>) => {
      const open = await db.connect();
      try {
        await open.query('BEGIN');
        const { rows } = await open.query(`INSERT INTO background_jobs (queue_name, unique_key, run_at) VALUES ('idle-open', $1, now() + interval '1 hour') RETURNING id::text`, [key]);
        const pending = enqueue();
        await waitFor('the enqueue waiting on the open row', async () => {
          const { rows: waiting } = await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`);
          return waiting[0].n > 0;
        });
        await open.query(end);
        return { holder: rows[0].id as string, result: await pending };
      } finally {
        open.release();
      }
    };

    it('keep: a duplicate of the holder that committed', async () => {
      const { holder, result } = await withOpenHolder('c1', 'COMMIT', () => queue.enqueueUnique('idle-open', { v: 1 }, { uniqueKey: 'c1' }));
      expect(result).toEqual({ id: holder, duplicate: true, replaced: false });
    });

    it('replace: replaces the holder that committed', async () => {
      const { holder, result } = await withOpenHolder('c2', 'COMMIT', () => queue.enqueueUnique('idle-open', { v: 2 }, { uniqueKey: 'c2', onConflict: 'replace' }));
      expect(result).toEqual({ id: holder, duplicate: true, replaced: true });
      expect((await row(holder)).payload).toEqual({ v: 2 });
    });

    it('a holder that rolled back leaves the key to the waiting enqueue', async () => {
      const { holder, result } = await withOpenHolder('c3', 'ROLLBACK', () => queue.enqueueUnique('idle-open', { v: 3 }, { uniqueKey: 'c3' }));
      expect(result).toEqual({ id: expect.any(String), duplicate: false, replaced: false });
      expect((result as { id: string }).id).not.toBe(holder);
      expect((await row((result as { id: string }).id)).payload).toEqual({ v: 3 });
    });
  });

  describe('races', () => {
    const KEYS = 100;
    const ATTEMPTS = 1_000;
    const ENQUEUERS = 8;
    let apps: INestApplicationContext[] = [];

    beforeAll(async () => {
      apps = await Promise.all(Array.from({ length: ENQUEUERS }, () => startApp(url, { queue: { ...ENQUEUE_ONLY, poolSize: 2 } })));
    });
    afterAll(async () => {
      await Promise.all(apps.map((a) => a.close()));
    });

    it(`${ENQUEUERS} enqueuers (own pools) x ${ATTEMPTS} attempts on ${KEYS} keys, every mode mixed: exactly ${KEYS} live jobs`, async () => {
      const modes = ['keep', 'replace', 'keep-run-at'] as const;
      const seen = await Promise.all(
        apps.map(async (a, e) => {
          const q = a.get(QueueService);
          const ids = new Map<string, Set<string>>();
          for (let i = 0; i < ATTEMPTS; i++) {
            const key = `k${(i * 7 + e * 13) % KEYS}`;
            const result = await q.enqueueUnique('race', { e, i }, { uniqueKey: key, onConflict: modes[(i + e) % 3], delayMs: 3_600_000 });
            (ids.get(key) ?? ids.set(key, new Set()).get(key)!).add(result.id);
          }
          return ids;
        }),
      );
      const { rows } = await db.query(`SELECT unique_key, id::text FROM background_jobs WHERE queue_name = 'race'`);
      expect(rows).toHaveLength(KEYS);
      expect(new Set(rows.map((r) => r.unique_key)).size).toBe(KEYS);
      // Every call learned the one job of its key.
      const idOf = new Map(rows.map((r) => [r.unique_key as string, r.id as string]));
      for (const ids of seen) for (const [key, set] of ids) expect([...set]).toEqual([idOf.get(key)]);
    });

    // One call (no manager) is one statement whose lock order the library chooses: calls naming the same keys in
    // different orders once deadlocked ('error: deadlock detected', 9-14 of 400 calls with 4 processes), because
    // rows were inserted in the caller's order and holders were locked in plan order; then (2 of 4,000 calls in
    // 1,000 rounds) because holders' updates ran before the inserts of keys new to the call, so two calls whose
    // snapshots differed by a third call's commit each waited on the other.
    const ROUNDS = Number(process.env.PG_QUEUE_ORDER_ROUNDS ?? 100);
    it(`4 enqueuers x ${ROUNDS} rounds, each call naming the same keys in its own order, every mode and modes mixed: no deadlock`, async () => {
      const modes = [{ onConflict: 'keep' }, { onConflict: 'replace' }, { onConflict: 'keep-run-at' }, { uniqueForMs: 3_600_000 }, 'mixed'] as const;
      const mixed = [{ onConflict: 'keep' }, { onConflict: 'replace' }, { onConflict: 'keep-run-at' }, { onConflict: 'replace' }] as const;
      const errors: string[] = [];
      const named = { k: new Set<string>(), w: new Set<string>() };
      for (let round = 0; round < ROUNDS; round++) {
        const mode = modes[round % modes.length];
        const prefix = typeof mode === 'object' && 'uniqueForMs' in mode ? 'w' : 'k';
        // 5 new keys, and the 5 of this mode's last round, whose holders are queued: 'replace' and 'keep-run-at' lock them.
        const keys = [0, 1, 2, 3, 4].flatMap((k) => [`${prefix}${round}-${k}`, `${prefix}${round - modes.length}-${k}`]);
        for (const key of keys) named[prefix].add(key);
        await Promise.all(
          apps.slice(0, 4).map(async (a, e) => {
            const mine = keys.map((_, i) => keys[(i * [1, 3, 7, 9][e] + e) % keys.length]); // a permutation per enqueuer
            const options = mode === 'mixed' ? mixed[e] : mode; // mixed: each enqueuer its own mode, on the same keys
            try {
              await a.get(QueueService).enqueueManyUnique(mine.map((uniqueKey) => ({ queue: 'race-order', payload: { e, round }, uniqueKey, delayMs: 3_600_000, ...options })));
            } catch (error) {
              errors.push(`round ${round}, enqueuer ${e}: ${(error as Error).message}`);
            }
          }),
        );
      }
      expect(errors).toEqual([]);
      const { rows } = await db.query(`SELECT count(*)::int AS n, count(DISTINCT unique_key)::int AS keys FROM background_jobs WHERE queue_name = 'race-order' AND unique_key IS NOT NULL`);
      expect(rows[0]).toEqual({ n: named.k.size, keys: named.k.size }); // one job per key
      expect((await db.query(`SELECT count(*)::int AS n FROM background_job_keys WHERE queue_name = 'race-order'`)).rows[0].n).toBe(named.w.size);
    });

    it(`${ENQUEUERS} enqueuers x 250 attempts on 20 uniqueForMs keys: one job per key, every duplicate names it`, async () => {
      const seen = await Promise.all(
        apps.map(async (a, e) => {
          const q = a.get(QueueService);
          const got: { key: string; id: string }[] = [];
          for (let i = 0; i < 250; i++) {
            const key = `w${(i + e) % 20}`;
            got.push({ key, id: (await q.enqueueUnique('race-window', { e, i }, { uniqueKey: key, uniqueForMs: 3_600_000, delayMs: 3_600_000 })).id });
          }
          return got;
        }),
      );
      const { rows } = await db.query(`SELECT k.unique_key, k.job_id::text AS id FROM background_job_keys AS k JOIN background_jobs AS j ON j.id = k.job_id WHERE k.queue_name = 'race-window'`);
      expect(rows).toHaveLength(20);
      expect(await count('race-window')).toBe(20);
      const idOf = new Map(rows.map((r) => [r.unique_key as string, r.id as string]));
      for (const { key, id } of seen.flat()) expect(id).toBe(idOf.get(key));
    });

    it(`the same inside transactions that commit or roll back at random: one job per key that a committed transaction enqueued`, async () => {
      const dataSources = await Promise.all(Array.from({ length: ENQUEUERS }, () => new DataSource({ type: 'postgres', url, extra: { max: 1 } }).initialize()));
      try {
        const committed = await Promise.all(
          dataSources.map(async (ds, e) => {
            const q = apps[e].get(QueueService);
            const mine: { key: string; id: string }[] = [];
            for (let t = 0; t < ATTEMPTS / 4; t++) {
              // Up to 4 keys per transaction, in key order: two transactions that take keys in opposite orders
              // deadlock on the unique index, as any two inserts of one key do (README: Unique jobs).
              const keys = [...new Set(Array.from({ length: 1 + Math.floor(Math.random() * 4) }, () => Math.floor(Math.random() * KEYS)))]
                .sort((x, y) => x - y)
                .map((k) => `t${k}`);
              const commit = Math.random() < 0.5;
              try {
                const got = await ds.transaction(async (manager) => {
                  const out: { key: string; id: string }[] = [];
                  for (const key of keys) out.push({ key, id: await q.enqueue('race-tx', { e, t }, { uniqueKey: key, manager, delayMs: 3_600_000 }) });
                  if (!commit) throw new Error('rollback');
                  return out;
                });
                mine.push(...got);
              } catch (error) {
                if ((error as Error).message !== 'rollback') throw error;
              }
            }
            return mine;
          }),
        );
        const { rows } = await db.query(`SELECT unique_key, id::text FROM background_jobs WHERE queue_name = 'race-tx'`);
        const expectedKeys = new Set(committed.flat().map((c) => c.key));
        expect(rows.map((r) => r.unique_key).sort()).toEqual([...expectedKeys].sort());
        // A committed call's id is the key's one job (a duplicate saw a committed holder; none completed).
        const idOf = new Map(rows.map((r) => [r.unique_key as string, r.id as string]));
        for (const c of committed.flat()) expect(c.id).toBe(idOf.get(c.key));
      } finally {
        await Promise.all(dataSources.map((ds) => ds.destroy()));
      }
    });
  });
});
