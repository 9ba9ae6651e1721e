import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { JobStore } from '../src/internal.js';
import { AdminStore } from '../src/store/admin.store.js';
import { SQL } from '../src/store/job.sql.js';
import { useTestApp, waitFor } from './support/test-app.js';

// Attempt history (README: "Attempt history"): one row per attempt that did not complete, written by the statement
// that records the failure or the lapsed lease; none for a job that completes at once. Asserted from the tables and
// from QueueService.get.
/** The 'ah-gated' handler's third attempt waits for this; `openGate()` lets it complete. */
let openGate: () => void = () => undefined;
let gate = new Promise<void>((resolve) => (openGate = resolve));

@Injectable()
class Handlers {
  /** Fails its first two attempts (50 ms each), then completes. */
  @JobHandler('ah-flaky', { maxAttempts: 5, backoff: { baseMs: 0, jitter: false } })
  async flaky(job: Job) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (job.attempt <= 2) throw new Error(`flaky failure ${job.attempt}\n    at the stack`);
  }

  @JobHandler('ah-fine')
  async fine() {}

  /** Fails its first two attempts, then waits for the test to let the third complete. */
  @JobHandler('ah-gated', { maxAttempts: 5, backoff: { baseMs: 0, jitter: false } })
  async gated(job: Job) {
    if (job.attempt <= 2) throw new Error(`gated failure ${job.attempt}`);
    await gate;
  }

  @JobHandler('ah-dead', { maxAttempts: 2, backoff: { baseMs: 0, jitter: false } })
  async dead(job: Job) {
    throw new Error(`dead ${job.attempt}`);
  }
}

describe('attempt history', () => {
  const t = useTestApp('attempt-history', { providers: [Handlers], queue: { workerId: 'history-worker', maintenance: { enabled: false } } });
  const historyRows = async (id: string) =>
    (await t.db.query(`SELECT attempt, worker, outcome, error, started_at, finished_at FROM background_job_attempts WHERE job_id = $1 ORDER BY id`, [id])).rows;

  it('a job that fails twice, then completes: two rows with their attempt, worker, times and error; get() returns them', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('ah-flaky', {});
    await queue.waitFor(id, { timeoutMs: 10_000 });
    const rows = await historyRows(id);
    expect(rows.map((r) => [r.attempt, r.worker, r.outcome, r.error.split('\n')[0]])).toEqual([
      [1, 'history-worker', 'failed', 'Error: flaky failure 1'],
      [2, 'history-worker', 'failed', 'Error: flaky failure 2'],
    ]);
    const job = await queue.get(id);
    expect(job).toMatchObject({ status: 'completed', attempts: 3 });
    expect(job!.history.map((h) => [h.attempt, h.outcome, h.worker])).toEqual([[1, 'failed', 'history-worker'], [2, 'failed', 'history-worker']]);
    for (const h of job!.history) {
      expect(h.startedAt).toBeInstanceOf(Date);
      expect(h.finishedAt.getTime()).toBeGreaterThanOrEqual(h.startedAt!.getTime());
      expect(h.durationMs).toBeGreaterThanOrEqual(40); // the handler's 50 ms, by the database clock
      expect(h.error).toContain('at the stack');
    }
  });

  it('a job that completes at its first attempt writes no row, and get() reads none', async () => {
    const queue = t.app.get(QueueService);
    const before = (await t.db.query(`SELECT count(*)::int AS n FROM background_job_attempts`)).rows[0].n;
    const ids = await queue.enqueueMany(Array.from({ length: 50 }, () => ({ queue: 'ah-fine', payload: {} })));
    for (const id of ids) await queue.waitFor(id, { timeoutMs: 10_000 });
    expect((await t.db.query(`SELECT count(*)::int AS n FROM background_job_attempts`)).rows[0].n).toBe(before);
    expect((await queue.get(ids[0]))!.history).toEqual([]);
  });

  it('a dead letter keeps a row per attempt', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('ah-dead', {});
    await waitFor('dead', async () => (await queue.get(id))?.status === 'failed');
    expect((await historyRows(id)).map((r) => [r.attempt, r.outcome, r.error])).toEqual([
      [1, 'failed', expect.stringContaining('dead 1')],
      [2, 'failed', expect.stringContaining('dead 2')],
    ]);
  });

  it('a lease the sweeper finds expired is recorded as lease-expired for a started job, not for one only read ahead', async () => {
    const store = t.app.get(JobStore);
    const queue = t.app.get(QueueService);
    const started = await queue.enqueue('ah-nobody', {});
    const [claimed] = (await store.claimJobs('ah-nobody', 1, 'crashed-worker', 60_000)).jobs;
    expect(claimed.id).toBe(started);
    const buffered = await queue.enqueue('ah-nobody', {});
    const [held] = (await store.claimJobs('ah-nobody', 1, 'crashed-worker', 60_000, false, { startNow: 0, bufferLeaseMs: 60_000 })).jobs;
    expect(held).toMatchObject({ id: buffered, buffered: true });
    await t.db.query(`UPDATE background_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = ANY($1::int8[])`, [[started, buffered]]);
    await t.db.query(SQL.rescueExpiredLeases);
    expect((await historyRows(started)).map((r) => [r.attempt, r.worker, r.outcome, r.error])).toEqual([
      [1, 'crashed-worker', 'lease-expired', expect.stringMatching(/^lease expired: worker crashed-worker stopped renewing it/)],
    ]);
    expect(await historyRows(buffered)).toEqual([]);
    const { rows } = await t.db.query(`SELECT status, attempts, locked_at FROM background_jobs WHERE id = $1`, [buffered]);
    expect(rows).toEqual([{ status: 'queued', attempts: 0, locked_at: null }]);
  });

  it('the pruner deletes the history of the jobs it deletes, and only theirs', async () => {
    const store = t.app.get(JobStore);
    const queue = t.app.get(QueueService);
    const old = await queue.enqueue('ah-dead', {});
    const kept = await queue.enqueue('ah-dead', {});
    await waitFor('both dead', async () => (await queue.get(old))?.status === 'failed' && (await queue.get(kept))?.status === 'failed');
    await t.db.query(`UPDATE background_jobs SET finished_at = now() - interval '2 days' WHERE id = $1`, [old]);
    const { deleted } = await store.deleteFinishedBefore(['failed'], 86_400_000, 1_000);
    expect(deleted).toBeGreaterThanOrEqual(1);
    expect(await historyRows(old)).toEqual([]);
    expect((await historyRows(kept)).length).toBe(2);
  });

  it('a bulk delete (the CLI and the dashboard) deletes the history of the jobs it deletes, and only theirs', async () => {
    const queue = t.app.get(QueueService);
    const doomed = await queue.enqueue('ah-dead', { bulk: true });
    const kept = await queue.enqueue('ah-dead', {});
    await waitFor('both dead', async () => (await queue.get(doomed))?.status === 'failed' && (await queue.get(kept))?.status === 'failed');
    expect((await historyRows(doomed)).length).toBe(2);
    const batch = await new AdminStore(t.db).bulkBatch('delete', { ids: [doomed], statuses: ['failed'] }, '0', 100);
    expect(batch.changed).toBe(1);
    expect(await historyRows(doomed)).toEqual([]);
    expect((await historyRows(kept)).length).toBe(2);
  });
});

describe('attempt history, with completedRetentionMs: 0', () => {
  const t = useTestApp('attempt-history-zero', { providers: [Handlers], queue: { maintenance: { enabled: false, completedRetentionMs: 0 } } });

  it('the completion that deletes its job deletes the job\'s history too', async () => {
    gate = new Promise<void>((resolve) => (openGate = resolve));
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('ah-gated', {});
    const rows = async () => (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_job_attempts WHERE job_id = $1`, [id])).rows[0].n;
    // Two failed attempts recorded while the third runs...
    await waitFor('two failures recorded', async () => (await rows()) === 2);
    openGate();
    // ...and gone with the row when the third completes.
    await waitFor('completed and deleted', async () => (await t.db.query(`SELECT 1 FROM background_jobs WHERE id = $1`, [id])).rowCount === 0);
    expect(await rows()).toBe(0);
  });
});
