import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, MAX_PROGRESS_BYTES, QueueService, type Job } from 'nestjs-pg-queue';
import { useTestApp, waitFor } from './support/test-app.js';

const release = new Map<string, () => void>();
const held = (job: Job) => new Promise<void>((resolve) => release.set(job.id, resolve));
const progressErrors: string[] = [];

@Injectable()
class Handlers {
  @JobHandler('res-report')
  async report(job: Job<{ rows: number }>) {
    return { rows: job.payload.rows, summary: `${job.payload.rows} rows` };
  }

  @JobHandler('res-nothing')
  async nothing() {}

  @JobHandler('res-null')
  async none() {
    return null;
  }

  @JobHandler('res-big', { maxAttempts: 3 })
  async big() {
    return { blob: 'x'.repeat(2_000) };
  }

  @JobHandler('res-bigint', { maxAttempts: 3 })
  async bigint() {
    return { n: 10n };
  }

  @JobHandler('res-progress')
  async loop(job: Job<{ calls: number }>) {
    for (let i = 1; i <= job.payload.calls; i++) {
      job.progress({ done: i, of: job.payload.calls });
      // Let timers (the heartbeat) run now and then, as a real loop doing I/O would.
      if (i % 100 === 0) await new Promise((r) => setImmediate(r));
    }
    await held(job);
    job.progress({ done: job.payload.calls, of: job.payload.calls, phase: 'final' }); // written with the completion
    return 'ok';
  }

  @JobHandler('res-progress-bad')
  async badProgress(job: Job) {
    for (const value of [undefined, () => 1, 10n, 'x'.repeat(MAX_PROGRESS_BYTES)]) {
      try {
        job.progress(value);
      } catch (error) {
        progressErrors.push((error as Error).message);
      }
    }
    job.progress(42);
  }
}

describe('results and progress', () => {
  const t = useTestApp('results', { providers: [Handlers], queue: { maxResultBytes: 1_024, leaseMs: 1_000, heartbeatMs: 150, maintenance: { enabled: false } } }, async (db) => {
    // Counts the row writes of background_jobs that change progress, and the lease renewals, per job.
    await db.query(`CREATE TABLE writes (job_id int8, progress_changed boolean, lease_renewed boolean)`);
    await db.query(`
      CREATE FUNCTION count_writes() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO writes VALUES (NEW.id, NEW.progress IS DISTINCT FROM OLD.progress,
          NEW.status = 'processing' AND OLD.status = 'processing' AND NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at);
        RETURN NEW;
      END $$`);
  });
  const row = async (id: string) => (await t.db.query(`SELECT status, attempts, result, progress, last_error FROM background_jobs WHERE id = $1`, [id])).rows[0];
  const settled = (id: string) => waitFor(`job ${id} settled`, async () => ['completed', 'failed'].includes((await row(id))?.status));

  it("stores the handler's result with the completed job and reads it back with get(); nothing is stored for undefined or null", async () => {
    const queue = t.app.get(QueueService);
    const report = await queue.enqueue('res-report', { rows: 3 });
    const nothing = await queue.enqueue('res-nothing', {});
    const none = await queue.enqueue('res-null', {});
    for (const id of [report, nothing, none]) await settled(id);
    expect(await row(report)).toMatchObject({ status: 'completed', result: { rows: 3, summary: '3 rows' } });
    const { rows } = await t.db.query(`SELECT id::text, result IS NULL AS no_result FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id`, [[nothing, none]]);
    expect(rows).toEqual([{ id: nothing, no_result: true }, { id: none, no_result: true }]);
    expect(await queue.get(report)).toMatchObject({ status: 'completed', result: { rows: 3, summary: '3 rows' }, progress: null });
    expect((await queue.get(nothing))?.result).toBeNull();
  });

  it('a result over maxResultBytes, or not JSON, fails the job for good with an error naming the problem (no retry)', async () => {
    const queue = t.app.get(QueueService);
    const big = await queue.enqueue('res-big', {});
    const bigint = await queue.enqueue('res-bigint', {});
    await settled(big);
    await settled(bigint);
    const b = await row(big);
    expect(b).toMatchObject({ status: 'failed', attempts: 1, result: null });
    expect(b.last_error).toContain(`job ${big} (res-big): the handler's result is 2011 bytes as JSON, over the maxResultBytes limit of 1024; the job fails without a retry`);
    const n = await row(bigint);
    expect(n).toMatchObject({ status: 'failed', attempts: 1, result: null });
    expect(n.last_error).toContain('it is not JSON (a BigInt at key "n"; convert it to a string or number first)');
  });

  it('10,000 progress calls cost a handful of row writes: progress rides the heartbeat, is visible while running, and is kept after completion', async () => {
    await t.db.query(`CREATE TRIGGER count_writes AFTER UPDATE ON background_jobs FOR EACH ROW EXECUTE FUNCTION count_writes()`);
    try {
      const queue = t.app.get(QueueService);
      const calls = 10_000;
      const id = await queue.enqueue('res-progress', { calls });
      await waitFor('the loop done', async () => release.has(id));
      const running = await waitFor('progress visible while running', async () => {
        const job = await queue.get(id);
        return job?.status === 'processing' && (job.progress as { done: number } | null)?.done === calls && job;
      });
      expect(running.progress).toEqual({ done: calls, of: calls });
      release.get(id)!();
      await settled(id);
      expect(await queue.get(id)).toMatchObject({ status: 'completed', result: 'ok', progress: { done: calls, of: calls, phase: 'final' } });
      const { rows } = await t.db.query<{ progress_writes: number; renewals: number; writes: number }>(
        `SELECT count(*) FILTER (WHERE progress_changed)::int AS progress_writes, count(*) FILTER (WHERE lease_renewed)::int AS renewals, count(*)::int AS writes
         FROM writes WHERE job_id = $1`,
        [id],
      );
      const [{ progress_writes, renewals, writes }] = rows;
      // Every progress write rode a renewal (heartbeat) or the completion: none has a statement of its own.
      expect(progress_writes).toBeGreaterThanOrEqual(2);
      expect(progress_writes).toBeLessThanOrEqual(renewals + 1);
      expect(writes).toBeLessThanOrEqual(renewals + 2); // the claim, the heartbeats, the completion: nothing else wrote the row
      expect(progress_writes).toBeLessThan(calls / 100);
      console.log(`progress: ${calls} calls, ${progress_writes} progress writes, ${renewals} heartbeats, ${writes} row writes in all`);
    } finally {
      await t.db.query(`DROP TRIGGER count_writes ON background_jobs`);
    }
  });

  it('job.progress() refuses a value that is not JSON or is too large, at the call, and keeps the last good one', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('res-progress-bad', {});
    await settled(id);
    expect(await queue.get(id)).toMatchObject({ status: 'completed', progress: 42 });
    expect(progressErrors).toEqual([
      `job.progress() of job ${id}: the value is not JSON (the value is undefined); pass a number or a small JSON value.`,
      `job.progress() of job ${id}: the value is not JSON (a function at the value); pass a number or a small JSON value.`,
      `job.progress() of job ${id}: the value is not JSON (a BigInt at the value; convert it to a string or number first); pass a number or a small JSON value.`,
      `job.progress() of job ${id}: the value is ${MAX_PROGRESS_BYTES + 2} bytes as JSON, over the limit of ${MAX_PROGRESS_BYTES}; progress is for a number or a small object.`,
    ]);
  });
});
