import { Injectable, Logger } from '@nestjs/common';
import { afterAll, describe, expect, it, jest } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { statusCounts, useTestApp, waitFor } from './support/test-app.js';

/**
 * Issue 13, item 1: one outcome the database refuses used to hold back every outcome of the process. Failure
 * outcomes of a batch went to PostgreSQL in one statement; a NUL in the error text, an error cut inside a
 * surrogate pair, or a backoff of Infinity / 1e300 (run_at NULL, int8 out of range) failed the whole
 * statement, forever, and completions waited behind the same backoff (20,000 no-op jobs: 30 completed in
 * 8 s). Now the text and the delay are made storable, each kind of outcome is written on its own, and a
 * row the database refuses is isolated and, after a few tries, left to the sweeper.
 */
const NOOPS = 20_000;

function cutInPair(): Error {
  const error = new Error('long');
  error.stack = 'E'.repeat(7_999) + '😀'.repeat(50); // the 8,000-char limit falls inside the first pair
  return error;
}

@Injectable()
class Handlers {
  @JobHandler('noop', { concurrency: 20, prefetch: 80, batchSize: 100 })
  async noop() {}

  @JobHandler('nul', { maxAttempts: 2, backoff: () => 10 })
  async nul() {
    JSON.parse('{"a": "\u0000"}'.replace('"\u0000"', '\u0000')); // V8 quotes the NUL in its message
  }

  @JobHandler('surrogate', { maxAttempts: 2, backoff: () => 10 })
  async surrogate() {
    throw cutInPair();
  }

  @JobHandler('infinite-backoff', { maxAttempts: 3, backoff: () => Infinity })
  async infinite() {
    throw new Error('fails');
  }

  @JobHandler('huge-backoff', { maxAttempts: 3, backoff: () => 1e300 })
  async huge() {
    throw new Error('fails');
  }

  @JobHandler('nan-backoff', { maxAttempts: 2, backoff: () => NaN })
  async nan() {
    throw new Error('fails');
  }

  @JobHandler('refused', { maxAttempts: 1, concurrency: 50 })
  async refused(job: Job) {
    await t.db.query('INSERT INTO runs (job_id) VALUES ($1)', [job.id]);
  }
}

const t = useTestApp(
  'unwritable',
  { providers: [Handlers], queue: { leaseMs: 2_000, heartbeatMs: 500, maintenance: { sweepIntervalMs: 100 } } },
  (db) => db.query('CREATE TABLE runs (job_id bigint, at timestamptz DEFAULT clock_timestamp()); CREATE TABLE refused_ids (id bigint)'),
);

describe('an outcome the database cannot store', () => {
  const errors = jest.spyOn(Logger.prototype, 'error');
  afterAll(() => errors.mockRestore());

  it('holds back nothing: 20,000 no-op jobs complete while failures with NUL, a cut pair and wild backoffs are written', async () => {
    const queue = t.app.get(QueueService);
    const poison: Record<string, string[]> = {};
    for (const q of ['nul', 'surrogate', 'infinite-backoff', 'huge-backoff', 'nan-backoff']) {
      poison[q] = await queue.enqueueMany(Array.from({ length: 3 }, (_, i) => ({ queue: q, payload: { i } })));
    }
    const t0 = Date.now();
    for (let i = 0; i < NOOPS; i += 5_000) {
      await queue.enqueueMany(Array.from({ length: 5_000 }, (_, j) => ({ queue: 'noop', payload: { n: i + j } })));
    }
    await waitFor('every no-op job completed', async () => (await statusCounts(t.db, 'noop')).completed === NOOPS, 90_000, 200);
    const tookMs = Date.now() - t0;
    console.log(`${NOOPS} no-op jobs completed in ${tookMs} ms beside the unwritable failures`);

    const settled = async () => {
      const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name <> 'noop' AND queue_name <> 'refused' AND status = 'processing'`);
      return rows[0].n === 0;
    };
    await waitFor('every failing job settled', settled, 20_000);
    const { rows } = await t.db.query<{ queue_name: string; status: string; attempts: number; run_at_finite: boolean; days: number; last_error: string }>(
      `SELECT queue_name, status::text, attempts, isfinite(run_at) AS run_at_finite,
              round(extract(epoch FROM run_at - now()) / 86400)::int AS days, last_error
       FROM background_jobs WHERE queue_name <> 'noop' AND queue_name <> 'refused' ORDER BY id`,
    );
    expect(rows).toHaveLength(15);
    for (const r of rows) {
      expect(r.run_at_finite).toBe(true);
      expect(r.last_error).toBeTruthy();
      switch (r.queue_name) {
        case 'nul':
          expect(r).toMatchObject({ status: 'failed', attempts: 2 });
          expect(r.last_error).toMatch(/^SyntaxError: .*\\u0000/);
          break;
        case 'surrogate':
          expect(r).toMatchObject({ status: 'failed', attempts: 2, last_error: `${'E'.repeat(7_999)}... [truncated]` });
          break;
        case 'infinite-backoff':
        case 'huge-backoff':
          // Clamped to the longest allowed delay (365 days): waiting, not lost, not NULL.
          expect(r).toMatchObject({ status: 'queued', attempts: 1, days: 365 });
          expect(r.last_error).toMatch(/^Error: fails/);
          break;
        case 'nan-backoff':
          expect(r).toMatchObject({ status: 'failed', attempts: 2 });
          break;
      }
    }
    const backoffLines = errors.mock.calls.map((c) => String(c[0])).filter((m) => m.startsWith('backoff of queue'));
    expect(backoffLines.some((m) => m.startsWith('backoff of queue "infinite-backoff" returned null'))).toBe(false); // says Infinity, not JSON's null
    expect(backoffLines.filter((m) => m.includes('"infinite-backoff"'))).toHaveLength(1); // once per queue
    expect(backoffLines.filter((m) => m.includes('"huge-backoff"'))).toHaveLength(1);
    expect(backoffLines.filter((m) => m.includes('"nan-backoff"'))).toHaveLength(1);
  }, 120_000);

  // The boundary fixes leave no known way for a handler to make an unwritable outcome, so a trigger refuses
  // the completion of one job: the others of its batch must land, and that one must go to the sweeper.
  it('isolates a row the database refuses: the rest of the batch lands, that job is left to the sweeper with one log line', async () => {
    const queue = t.app.get(QueueService);
    await t.db.query(`
      CREATE FUNCTION refuse_completion() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.id IN (SELECT id FROM refused_ids) THEN RAISE EXCEPTION 'completion of job % refused (test)', NEW.id; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse_completion BEFORE UPDATE ON background_jobs FOR EACH ROW
        WHEN (NEW.status = 'completed') EXECUTE FUNCTION refuse_completion();`);
    try {
      await queue.pause('refused');
      const ids = await queue.enqueueMany(Array.from({ length: 200 }, (_, i) => ({ queue: 'refused', payload: { i } })));
      const bad = ids[137];
      await t.db.query('INSERT INTO refused_ids VALUES ($1)', [bad]);
      const t0 = Date.now();
      await queue.resume('refused');
      await waitFor('199 completed', async () => (await statusCounts(t.db, 'refused')).completed === 199, 10_000);
      const landedMs = Date.now() - t0;
      expect(landedMs).toBeLessThan(5_000);
      // The refused completion is given up after a few tries; its lease lapses and the sweeper dead-letters
      // the job (its one attempt was used): not stuck in processing with a lease renewed forever.
      await waitFor('the refused job swept', async () => (await queue.get(bad))?.status === 'failed', 15_000);
      expect((await queue.get(bad))!.lastError).toMatch(/^lease expired/);
      expect(await statusCounts(t.db, 'refused')).toEqual({ completed: 199, failed: 1 });
      const lines = errors.mock.calls.map((c) => String(c[0])).filter((m) => m.startsWith(`job ${bad} (refused): its completion was refused`));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(`completion of job ${bad} refused (test)`);
    } finally {
      await t.db.query('DROP TRIGGER refuse_completion ON background_jobs; DROP FUNCTION refuse_completion()');
    }
  }, 60_000);
});
