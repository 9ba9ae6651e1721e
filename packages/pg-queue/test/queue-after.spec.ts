import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { useTestApp, waitFor } from './support/test-app.js';

// onConflict 'queue-after' (README, "Unique jobs"): a duplicate of a key whose holder runs waits as ONE successor with
// the latest payload, and starts once the holder ends (completed, failed for good, cancelled); while the holder is
// queued it is 'replace'. Asserted from the tables (qa_runs: every start and end, with the payload).

let db: pg.Pool;
const release = new Map<string, () => void>();

@Injectable()
class Handlers {
  @JobHandler('qa', { concurrency: 4, prefetch: 0, maxAttempts: 1 })
  async run(job: Job<{ v: number; fail?: boolean }>) {
    await db.query(`INSERT INTO qa_runs (job_id, v, event) VALUES ($1, $2, 'start')`, [job.id, job.payload.v]);
    await new Promise<void>((resolve) => release.set(job.id, resolve));
    await db.query(`INSERT INTO qa_runs (job_id, v, event) VALUES ($1, $2, 'end')`, [job.id, job.payload.v]);
    if (job.payload.fail) throw new Error('failed on purpose');
  }
}

describe("onConflict 'queue-after'", () => {
  const ctx = useTestApp('queue_after', { providers: [Handlers], queue: { maintenance: { enabled: false } } }, async (pool) => {
    db = pool;
    await pool.query(`CREATE TABLE qa_runs (seq bigserial PRIMARY KEY, job_id bigint NOT NULL, v int NOT NULL, event text NOT NULL)`);
  });
  const queue = () => ctx.app.get(QueueService);
  const started = (id: string) => waitFor(`job ${id} started`, async () => release.has(id));
  const row = async (id: string) => (await db.query(`SELECT status, payload, unique_key FROM background_jobs WHERE id = $1`, [id])).rows[0];
  const finish = (id: string) => {
    release.get(id)!();
    release.delete(id);
  };

  it('a running holder gets one successor, with the last payload, which starts only when the holder completes', async () => {
    const first = await queue().enqueueUnique('qa', { v: 1 }, { uniqueKey: 'k1', onConflict: 'queue-after' });
    expect(first).toEqual({ id: first.id, duplicate: false, replaced: false });
    await started(first.id);
    const second = await queue().enqueueUnique('qa', { v: 2 }, { uniqueKey: 'k1', onConflict: 'queue-after' });
    expect(second).toEqual({ id: expect.any(String), duplicate: false, replaced: false, queuedAfter: true });
    expect(second.id).not.toBe(first.id);
    const third = await queue().enqueueUnique('qa', { v: 3 }, { uniqueKey: 'k1', onConflict: 'queue-after' });
    expect(third).toEqual({ id: second.id, duplicate: true, replaced: true, queuedAfter: true });
    // enqueue() returns the successor's id too.
    expect(await queue().enqueue('qa', { v: 4 }, { uniqueKey: 'k1', onConflict: 'queue-after' })).toBe(second.id);
    expect(await row(second.id)).toEqual({ status: 'blocked', payload: { v: 4 }, unique_key: 'k1' });
    expect(await row(first.id)).toMatchObject({ status: 'processing', payload: { v: 1 } });
    expect(await queue().get(first.id)).toMatchObject({ successorId: second.id, waitsForId: null });
    expect(await queue().get(second.id)).toMatchObject({ status: 'blocked', successorId: null, waitsForId: first.id });
    expect((await queue().whyNotRunning(second.id))?.reasons).toEqual([{ gate: 'successor', reason: `waiting for the job that holds its unique key to end (onConflict 'queue-after'): job ${first.id}, running` }]);
    expect((await db.query(`SELECT job_id::text FROM background_job_successors WHERE queue_name = 'qa' AND unique_key = 'k1'`)).rows).toEqual([{ job_id: second.id }]);
    // Another mode while the successor waits: a duplicate of the running holder, as before.
    expect(await queue().enqueueUnique('qa', { v: 9 }, { uniqueKey: 'k1' })).toEqual({ id: first.id, duplicate: true, replaced: false });

    finish(first.id);
    await started(second.id);
    finish(second.id);
    await waitFor('the successor completed', async () => (await row(second.id)).status === 'completed');
    const runs = (await db.query(`SELECT job_id::text, v, event FROM qa_runs ORDER BY seq`)).rows;
    expect(runs).toEqual([
      { job_id: first.id, v: 1, event: 'start' },
      { job_id: first.id, v: 1, event: 'end' },
      { job_id: second.id, v: 4, event: 'start' },
      { job_id: second.id, v: 4, event: 'end' },
    ]);
    expect((await db.query(`SELECT count(*)::int AS n FROM background_job_successors`)).rows).toEqual([{ n: 0 }]);
  });

  it('a queued holder is replaced, as with replace; a failed or cancelled holder lets its successor start', async () => {
    const q = queue();
    const held = await q.enqueueUnique('qa', { v: 1 }, { uniqueKey: 'k2', onConflict: 'queue-after', delayMs: 60_000 });
    const again = await q.enqueueUnique('qa', { v: 2 }, { uniqueKey: 'k2', onConflict: 'queue-after', delayMs: 60_000 });
    expect(again).toEqual({ id: held.id, duplicate: true, replaced: true });
    expect(await row(held.id)).toMatchObject({ status: 'queued', payload: { v: 2 } });
    await q.cancel(held.id);

    // Failed for good (maxAttempts 1).
    const failing = await q.enqueueUnique('qa', { v: 10, fail: true }, { uniqueKey: 'k3', onConflict: 'queue-after' });
    await started(failing.id);
    const next = await q.enqueueUnique('qa', { v: 11 }, { uniqueKey: 'k3', onConflict: 'queue-after' });
    expect(next.queuedAfter).toBe(true);
    finish(failing.id);
    await started(next.id);
    expect(await row(failing.id)).toMatchObject({ status: 'failed' });
    finish(next.id);

    // Cancelled while running.
    const running = await q.enqueueUnique('qa', { v: 20 }, { uniqueKey: 'k4', onConflict: 'queue-after' });
    await started(running.id);
    const after = await q.enqueueUnique('qa', { v: 21 }, { uniqueKey: 'k4', onConflict: 'queue-after' });
    expect(await q.cancel(running.id)).toBe('cancelled');
    await started(after.id);
    finish(after.id);
    finish(running.id);
    await waitFor('k4 done', async () => (await row(after.id)).status === 'completed');
    // A waiting successor cancelled is forgotten: the next duplicate makes a new one.
    const holder = await q.enqueueUnique('qa', { v: 30 }, { uniqueKey: 'k5', onConflict: 'queue-after' });
    await started(holder.id);
    const s1 = await q.enqueueUnique('qa', { v: 31 }, { uniqueKey: 'k5', onConflict: 'queue-after' });
    expect(await q.cancel(s1.id)).toBe('cancelled');
    const s2 = await q.enqueueUnique('qa', { v: 32 }, { uniqueKey: 'k5', onConflict: 'queue-after' });
    expect(s2).toMatchObject({ duplicate: false, queuedAfter: true });
    expect(s2.id).not.toBe(s1.id);
    finish(holder.id);
    await started(s2.id);
    finish(s2.id);
  });

  it('in a transaction, and from SQL: the successor waits for a holder that ends before the commit', async () => {
    const q = queue();
    const holder = await q.enqueueUnique('qa', { v: 40 }, { uniqueKey: 'k6', onConflict: 'queue-after' });
    await started(holder.id);
    const client = await db.connect();
    try {
      await client.query('BEGIN');
      const made = await q.enqueueUnique('qa', { v: 41 }, { uniqueKey: 'k6', onConflict: 'queue-after', manager: client });
      expect(made.queuedAfter).toBe(true);
      // The holder ends while the transaction is open: its statement cannot see the successor yet.
      finish(holder.id);
      await waitFor('holder completed', async () => (await row(holder.id)).status === 'completed');
      expect(await row(made.id)).toBeUndefined();
      await client.query('COMMIT');
      // The check at commit found no live holder: the successor started.
      await started(made.id);
      finish(made.id);
    } finally {
      client.release();
    }
    const sqlHolder = await q.enqueueUnique('qa', { v: 50 }, { uniqueKey: 'k7', onConflict: 'queue-after' });
    await started(sqlHolder.id);
    const { rows } = await db.query(`SELECT id::text, duplicate, replaced FROM pg_queue_enqueue_unique('qa', '{"v": 51}', unique_key => 'k7', on_conflict => 'queue-after')`);
    expect(rows).toEqual([{ id: expect.any(String), duplicate: false, replaced: false }]);
    expect(await row(rows[0].id)).toMatchObject({ status: 'blocked' });
    finish(sqlHolder.id);
    await started(rows[0].id);
    finish(rows[0].id);
  });
});
