import { TypeOrmModule } from '@nestjs/typeorm';
import { describe, expect, it } from '@jest/globals';
import { DataSource } from 'typeorm';
import { PgQueueModule, QueueService, type JobSpec } from 'nestjs-pg-queue';
import { useTestApp } from './support/test-app.js';

const MB = 1_000_000;

/** A payload of about `size` characters, different per row so that a mix-up of rows shows. */
const big = (i: number, size = MB, extra: Record<string, unknown> = {}) => ({ i, ...extra, blob: `${i}:`.padEnd(size - 40, 'x') });

describe('payload text edges (real database)', () => {
  const ctx = useTestApp('payload-edges', (url) => ({
    imports: [TypeOrmModule.forRoot({ type: 'postgres', url }), PgQueueModule.forRoot({ workers: false })],
  }));
  const stored = async (queue: string) =>
    (await ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = $1`, [queue])).rows[0].n;

  it('stores the literal text \\u0000 (a backslash, then u0000) and gives it back unchanged', async () => {
    const queue = ctx.app.get(QueueService);
    const payload = { path: 'C:\\u0000\\temp', regex: '\\\\ud800', emoji: '😀' };
    const id = await queue.enqueue('literal', payload);
    expect((await queue.get(id))?.payload).toEqual(payload);
    const { rows } = await ctx.db.query<{ path: string }>(`SELECT payload->>'path' AS path FROM background_jobs WHERE id = $1`, [id]);
    expect(rows[0].path).toBe('C:\\u0000\\temp');
  });

  it('refuses a lone surrogate at enqueue, naming the key, and stores nothing', async () => {
    const queue = ctx.app.get(QueueService);
    await expect(queue.enqueue('surrogate', { note: 'cut in half \uD83D' })).rejects.toThrow(
      'Cannot enqueue to "surrogate": the payload is not JSON-serialisable (the string at key "note" contains a lone UTF-16 surrogate',
    );
    await expect(queue.enqueueMany([{ queue: 'surrogate', payload: { ok: 1 } }, { queue: 'surrogate', payload: { ['\uDE00']: 1 } }])).rejects.toThrow(
      'enqueueMany: job #1: Cannot enqueue to "surrogate"',
    );
    expect(await stored('surrogate')).toBe(0);
  });

  it('enqueueMany of 300 payloads of 1 MB each (300 MB, over jsonb’s 256 MB) stores all of them, ids in order', async () => {
    const queue = ctx.app.get(QueueService);
    const ids = await queue.enqueueMany(Array.from({ length: 300 }, (_, i) => ({ queue: 'huge', payload: big(i) })));
    expect(ids).toHaveLength(300);
    // Sizes without decompressing 300 MB (pg_column_size reads the stored size); contents of a few rows in full.
    const { rows } = await ctx.db.query<{ id: string; stored: number }>(
      `SELECT id, pg_column_size(payload) AS stored FROM background_jobs WHERE queue_name = 'huge' ORDER BY id`,
    );
    expect(rows.map((r) => r.id)).toEqual(ids);
    expect(rows.filter((r) => !(r.stored > 1_000))).toEqual([]);
    const sample = [0, 17, 150, 299];
    const { rows: full } = await ctx.db.query<{ id: string; i: number; chars: number; head: string }>(
      `SELECT id, (payload->>'i')::int AS i, length(payload->>'blob') AS chars, left(payload->>'blob', 5) AS head FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id`,
      [sample.map((i) => ids[i])],
    );
    expect(full).toEqual(sample.map((i) => ({ id: ids[i], i, chars: MB - 40, head: `${i}:`.padEnd(5, 'x') })));
  }, 60_000);

  describe('a statement split in chunks is still all or nothing', () => {
    // A row refused by the database itself, in the second chunk (16 MiB of payload per chunk: rows 0-15 of
    // 1 MB, then row 16): the first chunk is already inserted then.
    const refuseMarkedRows = () =>
      ctx.db.query(`
        CREATE OR REPLACE FUNCTION refuse_marked() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.payload ? 'refuse' THEN RAISE EXCEPTION 'refused by the test trigger'; END IF; RETURN NEW; END $$;
        DROP TRIGGER IF EXISTS refuse_marked ON background_jobs;
        CREATE TRIGGER refuse_marked BEFORE INSERT ON background_jobs FOR EACH ROW EXECUTE FUNCTION refuse_marked();`);
    const jobs = (queue: string, mixed: boolean): JobSpec[] =>
      Array.from({ length: 17 }, (_, i) => ({ queue, payload: big(i, MB, i === 16 ? { refuse: true } : {}), priority: mixed ? i % 2 : 0 }));

    it('without a manager: its own transaction', async () => {
      await refuseMarkedRows();
      const queue = ctx.app.get(QueueService);
      await expect(queue.enqueueMany(jobs('atomic-own', false))).rejects.toThrow('refused by the test trigger');
      await expect(queue.enqueueMany(jobs('atomic-own-mixed', true))).rejects.toThrow('refused by the test trigger');
      expect(await stored('atomic-own')).toBe(0);
      expect(await stored('atomic-own-mixed')).toBe(0);
      // The pool's connections are usable afterwards (none left inside an aborted transaction).
      await expect(Promise.all(Array.from({ length: 12 }, () => queue.enqueue('after', { ok: true })))).resolves.toHaveLength(12);
    }, 60_000);

    it('with a manager: inside the caller’s transaction, or one of its own when the manager is in none', async () => {
      await refuseMarkedRows();
      const queue = ctx.app.get(QueueService);
      const dataSource = ctx.app.get(DataSource);
      await expect(dataSource.transaction((manager) => queue.enqueueMany(jobs('atomic-caller-bad', false), { manager }))).rejects.toThrow('refused by the test trigger');
      expect(await stored('atomic-caller-bad')).toBe(0);
      // A manager outside any transaction (the DataSource's own): the chunks still share one.
      await expect(queue.enqueueMany(jobs('atomic-plain-manager', false), { manager: dataSource.manager })).rejects.toThrow('refused by the test trigger');
      expect(await stored('atomic-plain-manager')).toBe(0);
      const good = jobs('atomic-caller', false).slice(0, 16);
      good.push({ queue: 'atomic-caller', payload: big(16) }); // two chunks, none refused
      await expect(
        dataSource.transaction(async (manager) => {
          expect(await queue.enqueueMany(good, { manager })).toHaveLength(17);
          throw new Error('the caller rolls back');
        }),
      ).rejects.toThrow('the caller rolls back');
      expect(await stored('atomic-caller')).toBe(0);
      const ids = await dataSource.transaction((manager) => queue.enqueueMany(good, { manager }));
      expect(ids).toHaveLength(17);
      expect(await stored('atomic-caller')).toBe(17);
      await ctx.db.query(`DROP TRIGGER refuse_marked ON background_jobs`);
    }, 60_000);
  });
});
