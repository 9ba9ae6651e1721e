import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { WorkerPool } from '../src/internal.js';
import { useTestApp, waitFor } from './support/test-app.js';

// job.spawn() of an attempt aborted while the call waited (found by the simulation, issue 40, seed 7 on main after
// issue 39's fixes): a flow job's handler called spawn() while its process's API pool was full of the app's own
// waiting enqueues; its timeout fired during the wait, the failure was written and the job retried, and when the
// wait ended spawn() returned as if nothing had happened: the handler ran on to its end (its outcome discarded)
// beside the retry, two runs of one job at once although the handler awaited nothing but the library. A step asked
// for after an abort is refused (steps.spec.ts); a spawn is now refused the same way. What each spawn() call did is
// a row of `spawn_calls`, written by the handler; the job's and its children's rows are read from background_jobs.
let gate: Promise<void> = Promise.resolve();
const signals = new Map<string, AbortSignal>();

@Injectable()
class Handlers {
  @JobHandler('spawn-abort', { timeoutMs: 1_000, maxAttempts: 1 })
  async spawner(job: Job<{ db: string }>) {
    signals.set(job.id, job.signal);
    await gate;
    await record(job, 'calling');
    let what = 'returned';
    try {
      await job.spawn([{ ref: 'child', queue: 'spawn-abort-child', payload: {} }]);
    } catch (error) {
      what = `threw: ${(error as Error).message}`;
    }
    await record(job, what);
  }

  /** Ignores its signal: waits for the abort, then spawns, as a handler that does not look at job.signal would. */
  @JobHandler('spawn-after-abort', { timeoutMs: 200, maxAttempts: 1 })
  async afterAbort(job: Job) {
    await new Promise((resolve) => (job.signal.aborted ? resolve(undefined) : job.signal.addEventListener('abort', resolve)));
    let what = 'returned';
    try {
      await job.spawn([{ ref: 'child', queue: 'spawn-abort-child', payload: {} }]);
    } catch (error) {
      what = `threw: ${(error as Error).message}`;
    }
    await record(job, what);
  }

  @JobHandler('spawn-abort-child')
  child() {
    return undefined;
  }
}

let record: (job: Job, what: string) => Promise<unknown> = async () => undefined;

describe('job.spawn() of an aborted attempt', () => {
  const t = useTestApp('flows_spawn_abort', { providers: [Handlers], queue: { maintenance: { enabled: false } } }, (db) =>
    db.query(`CREATE TABLE spawn_calls (id bigserial PRIMARY KEY, job_id int8 NOT NULL, attempt int NOT NULL, what text NOT NULL)`),
  );
  const calls = async (id: string) => (await t.db.query<{ what: string }>(`SELECT what FROM spawn_calls WHERE job_id = $1 ORDER BY id`, [id])).rows.map((r) => r.what);
  const jobs = async (flowId: string) =>
    (await t.db.query<{ flow_ref: string; status: string; attempts: number }>(`SELECT flow_ref, status::text, attempts FROM background_jobs WHERE flow_id = $1 ORDER BY id`, [flowId])).rows;

  it('a spawn() whose attempt timed out while it waited records nothing and throws the timeout', async () => {
    record = (job, what) => t.db.query(`INSERT INTO spawn_calls (job_id, attempt, what) VALUES ($1, $2, $3)`, [job.id, job.attempt, what]);
    await waitFor('LISTEN connection', async () => t.app.get(WorkerPool).listening);
    let open!: () => void;
    gate = new Promise((resolve) => (open = resolve));
    const flow = await t.app.get(QueueService).enqueueFlow({ name: 'spawn-abort', jobs: [{ ref: 'parent', queue: 'spawn-abort', payload: { db: 'x' } }] });
    const id = flow.jobs.parent;
    await waitFor('the handler began', async () => signals.get(id));
    // Every statement on background_jobs waits behind this lock: the spawn's reads do, past the attempt's timeout.
    const lock = await t.db.connect();
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE background_jobs IN ACCESS EXCLUSIVE MODE');
      open();
      await waitFor('the handler called spawn()', async () => (await lock.query(`SELECT 1 FROM spawn_calls WHERE job_id = $1`, [id])).rowCount === 1);
      await waitFor('the attempt timed out while spawn() waited', async () => signals.get(id)!.aborted, 10_000);
      await lock.query('COMMIT');
    } finally {
      lock.release();
    }
    await waitFor('the spawn() call ended', async () => (await calls(id)).length === 2, 10_000);
    expect(await calls(id)).toEqual(['calling', expect.stringMatching(/^threw: .*timed out after 1000 ms/)]);
    await waitFor('the job failed', async () => (await jobs(flow.id)).some((j) => j.status === 'failed'), 10_000);
    expect(await jobs(flow.id)).toEqual([{ flow_ref: 'parent', status: 'failed', attempts: 1 }]);
  });

  it('a spawn() asked for after the attempt timed out records nothing and throws the timeout', async () => {
    const flow = await t.app.get(QueueService).enqueueFlow({ name: 'spawn-after-abort', jobs: [{ ref: 'parent', queue: 'spawn-after-abort', payload: {} }] });
    const id = flow.jobs.parent;
    await waitFor('the spawn() call ended', async () => (await calls(id)).length === 1, 10_000);
    expect(await calls(id)).toEqual([expect.stringMatching(/^threw: .*timed out after 200 ms/)]);
    await waitFor('the job failed', async () => (await jobs(flow.id)).some((j) => j.status === 'failed'), 10_000);
    expect(await jobs(flow.id)).toEqual([{ flow_ref: 'parent', status: 'failed', attempts: 1 }]);
  });
});
