import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { DataSource } from 'typeorm';
import { JobHandler, JobSnoozedError, PgQueueModule, QueueService, type BatchJob, type Job, type TransactionalJob } from 'nestjs-pg-queue';
import { JobStore, MaintenanceScheduler } from '../src/internal.js';
import { FLOW_SQL } from '../src/store/flow.sql.js';
import { JobStatements } from '../src/store/job-statements.js';
import { SQL } from '../src/store/job.sql.js';
import { getQueueTestKit } from 'nestjs-pg-queue/testing';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';
import { startTestingApp } from './support/testing-app.js';

// Job logs (README: "Job logs"): job.log() lines stored with the job, bounded per job and per line, written with the
// heartbeat or the outcome, read per attempt by QueueService.get. Asserted from the `logs` column and from get(); the
// statements a job that never logs runs are recorded by name (a spy on JobStatements) and checked against the SQL.

const MAX_LINES = 5;
const MAX_LINE = 40;
const gates = new Map<string, () => void>();
const gate = (id: string) => new Promise<void>((resolve) => gates.set(id, resolve));

@Injectable()
class Handlers {
  /** Logs two lines per attempt and fails its first attempt. */
  @JobHandler('jl-retry', { maxAttempts: 3, backoff: { baseMs: 0, jitter: false } })
  async retry(job: Job) {
    job.log(`attempt ${job.attempt} begins`);
    if (job.attempt === 1) {
      job.log('attempt 1 fails');
      throw new Error('first attempt fails');
    }
    job.log(`attempt ${job.attempt} ends`);
  }

  /** Logs `payload.n` lines, `payload.beat` of them before it waits for a heartbeat to write them. */
  @JobHandler('jl-many')
  async many(job: Job<{ n: number; beat?: number }>) {
    for (let i = 1; i <= job.payload.n; i++) {
      if (i === (job.payload.beat ?? 0) + 1 && job.payload.beat !== undefined) await gate(job.id);
      job.log(`line ${i}`);
    }
  }

  @JobHandler('jl-long')
  async long(job: Job<{ text: string }>) {
    job.log(job.payload.text);
    job.log({ not: 'a string', n: 1 } as unknown as string);
  }

  /** Logs, then waits: the heartbeat, not an outcome, writes its lines. */
  @JobHandler('jl-held', { concurrency: 2 })
  async held(job: Job) {
    job.log('before the wait');
    await gate(job.id);
    job.log('after the wait');
  }

  /** Never logs: the statements it runs are the ones it ran before job.log() existed. */
  @JobHandler('jl-plain', { concurrency: 4, maxAttempts: 2, backoff: { baseMs: 0, jitter: false } })
  async plain(job: Job<{ fail?: boolean; snooze?: boolean; slow?: boolean; result?: boolean }>) {
    if (job.payload.slow) await new Promise((resolve) => setTimeout(resolve, 700)); // over a few heartbeats
    if (job.payload.snooze && job.attempt === 1 && !gates.has(`snoozed ${job.id}`)) {
      gates.set(`snoozed ${job.id}`, () => undefined);
      throw new JobSnoozedError(10);
    }
    if (job.payload.fail && job.attempt === 1) throw new Error('plain failure');
    return job.payload.result ? { ok: true } : undefined;
  }

  /** Snoozes its first run (uncharged: the next run is the same attempt, under another claim). */
  @JobHandler('jl-snooze')
  async snooze(job: Job) {
    const first = !gates.has(`snoozed ${job.id}`);
    job.log(first ? 'before the snooze' : 'after the snooze');
    if (first) {
      gates.set(`snoozed ${job.id}`, () => undefined);
      throw new JobSnoozedError(10);
    }
  }

  /** A batch handler: each job logs its own lines; the second job fails on its own. */
  @JobHandler('jl-batch', { batch: { size: 3, waitMs: 200 }, maxAttempts: 1 })
  async batch(jobs: BatchJob<{ i: number }>[]) {
    for (const job of jobs) {
      job.log(`batch job ${job.payload.i}`);
      if (job.payload.i === 2) job.fail(new Error('job 2 of the batch fails'));
    }
  }

  /** A job of a flow that spawns a child: its lines go with the completion that spawns. */
  @JobHandler('jl-spawner')
  async spawner(job: Job) {
    job.log('spawning a child');
    await job.spawn([{ ref: 'child', queue: 'jl-plain', payload: {} }]);
  }
}

@Injectable()
class TxHandlers {
  /** A transactional handler: lines logged in its transaction are written with its completion, or with its failure. */
  @JobHandler('jl-tx', { transactional: true, maxAttempts: 2, backoff: { baseMs: 0, jitter: false } })
  async tx(job: TransactionalJob<{ failFirst: boolean }>) {
    await job.manager.query('SELECT 1');
    job.log(`tx attempt ${job.attempt}`);
    if (job.payload.failFirst && job.attempt === 1) throw new Error('tx attempt 1 fails');
  }
}

interface StoredLogs {
  lines: { attempt: number; at: string; line: string }[];
  total: number;
  claim: string;
  seq: number;
}

describe('job logs', () => {
  let url: string;
  let db: pg.Pool;
  let app: INestApplicationContext;
  let dataSource: DataSource;
  let queue: QueueService;
  /** Statement names the queue's pools ran (JobStatements.run and runIds), while `recording` is set. */
  let recording: string[] | undefined;
  const originalRun = JobStatements.prototype.run;

  const stored = async (id: string): Promise<StoredLogs | null> => (await db.query(`SELECT logs FROM background_jobs_all WHERE id = $1`, [id])).rows[0]?.logs ?? null;

  beforeAll(async () => {
    JobStatements.prototype.run = function (this: JobStatements, name, values) {
      recording?.push(name);
      return originalRun.call(this, name, values);
    } as typeof originalRun;
    url = await createTestDatabase('job-logs');
    db = sqlPool(url);
    dataSource = new DataSource({ type: 'postgres', url, extra: { max: 4 } });
    app = await startApp(url, {
      providers: [Handlers, TxHandlers],
      imports: [
        PgQueueModule.forRoot({
          dataSource,
          workerId: 'logs-worker',
          leaseMs: 3_000,
          heartbeatMs: 150,
          jobLogs: { maxLines: MAX_LINES, maxLineLength: MAX_LINE },
          maintenance: { enabled: false },
        }),
      ],
    });
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    JobStatements.prototype.run = originalRun;
    for (const release of gates.values()) release();
    await app?.close();
    await dataSource?.destroy();
    await db?.end();
  });

  it('keeps the lines of every attempt through a retry, each with its attempt and the database time it was logged', async () => {
    const before = (await db.query(`SELECT now() AS now`)).rows[0].now as Date;
    const id = await queue.enqueue('jl-retry', {});
    await queue.waitFor(id, { timeoutMs: 10_000 });
    const after = (await db.query(`SELECT now() AS now`)).rows[0].now as Date;
    const job = (await queue.get(id))!;
    expect(job).toMatchObject({ status: 'completed', attempts: 2, logsDropped: 0 });
    expect(job.logs.map((l) => [l.attempt, l.line])).toEqual([
      [1, 'attempt 1 begins'],
      [1, 'attempt 1 fails'],
      [2, 'attempt 2 begins'],
      [2, 'attempt 2 ends'],
    ]);
    for (const l of job.logs) {
      expect(l.at).toBeInstanceOf(Date);
      expect(l.at.getTime()).toBeGreaterThanOrEqual(before.getTime() - 50);
      expect(l.at.getTime()).toBeLessThanOrEqual(after.getTime());
    }
    // Oldest first, by the database clock: each line no earlier than the one before.
    for (let i = 1; i < job.logs.length; i++) expect(job.logs[i].at.getTime()).toBeGreaterThanOrEqual(job.logs[i - 1].at.getTime());
    // The failure's lines went with the failure, the second attempt's with the completion; the attempt history beside them.
    expect(job.history.map((h) => [h.attempt, h.outcome])).toEqual([[1, 'failed']]);
    expect(await stored(id)).toMatchObject({ total: 4, seq: 2 });
  });

  it('keeps the newest jobLogs.maxLines lines, across heartbeat and outcome writes; logsDropped counts the rest', async () => {
    const id = await queue.enqueue('jl-many', { n: 12, beat: 3 });
    // Three lines, then the handler waits: a heartbeat writes them while it runs.
    await waitFor('the heartbeat wrote three lines', async () => (await stored(id))?.lines.length === 3);
    expect((await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0].status).toBe('processing');
    gates.get(id)!();
    await queue.waitFor(id, { timeoutMs: 10_000 });
    const job = (await queue.get(id))!;
    expect(job.logs.map((l) => l.line)).toEqual(['line 8', 'line 9', 'line 10', 'line 11', 'line 12']);
    expect(job.logsDropped).toBe(7);
    expect(await stored(id)).toMatchObject({ total: 12, seq: 12 });

    // All at once (the worker keeps at most maxLines unwritten lines itself): the same newest five.
    const burst = await queue.enqueue('jl-many', { n: 30 });
    await queue.waitFor(burst, { timeoutMs: 10_000 });
    const burstJob = (await queue.get(burst))!;
    expect(burstJob.logs.map((l) => l.line)).toEqual(['line 26', 'line 27', 'line 28', 'line 29', 'line 30']);
    expect(burstJob.logsDropped).toBe(25);
  });

  it('cuts a line past jobLogs.maxLineLength with a marker; a value that is not a string is logged as inspected', async () => {
    const id = await queue.enqueue('jl-long', { text: 'x'.repeat(100) });
    await queue.waitFor(id, { timeoutMs: 10_000 });
    const [long, other] = (await queue.get(id))!.logs;
    expect(long.line).toBe(`${'x'.repeat(MAX_LINE)}... [truncated]`);
    expect(other.line).toBe("{ not: 'a string', n: 1 }");
  });

  it('writes the lines with the heartbeat while the handler runs, not in a statement of their own', async () => {
    const id = await queue.enqueue('jl-held', {});
    recording = [];
    await waitFor('the heartbeat wrote the line', async () => (await stored(id))?.lines.length === 1);
    const written = recording;
    recording = undefined;
    expect((await stored(id))!.lines.map((l) => l.line)).toEqual(['before the wait']);
    expect(written.filter((name) => /Logs$/.test(name))).toEqual(expect.arrayContaining(['heartbeatWithLogs']));
    expect(new Set(written.filter((name) => /Logs$/.test(name)))).toEqual(new Set(['heartbeatWithLogs']));
    gates.get(id)!();
    await queue.waitFor(id, { timeoutMs: 10_000 });
    expect((await queue.get(id))!.logs.map((l) => l.line)).toEqual(['before the wait', 'after the wait']);
  });

  it('a job that never logs runs the statements it ran before job.log() existed, and its row holds no logs', async () => {
    // The plain statements do not mention the column: the variants that write lines are separate statements.
    for (const name of ['completeJobs', 'completeJobsWithResults', 'completeJobsKeyless', 'completeJobsWithResultsKeyless', 'deleteCompletedJobs', 'failJobs', 'failJobsWithExtras', 'snoozeJobs', 'heartbeat', 'heartbeatWithProgress', 'releaseJobs', 'markStarted'] as const) {
      expect([name, SQL[name].includes('logs')]).toEqual([name, false]);
    }
    expect(FLOW_SQL.completeSpawning.includes('logs')).toBe(false);
    recording = [];
    const ids = await queue.enqueueMany([
      ...Array.from({ length: 8 }, () => ({ queue: 'jl-plain', payload: {} })),
      { queue: 'jl-plain', payload: { result: true } },
      { queue: 'jl-plain', payload: { fail: true } },
      { queue: 'jl-plain', payload: { snooze: true } },
      { queue: 'jl-plain', payload: { slow: true } },
    ]);
    for (const id of ids) await queue.waitFor(id, { timeoutMs: 10_000 });
    const ran = recording;
    recording = undefined;
    expect(ran.filter((name) => name.endsWith('WithLogs'))).toEqual([]);
    // It did run the outcomes and heartbeats this test is about.
    // (Jobs without a unique key complete by the keyless variants: no successor can wait for them.)
    expect(ran).toEqual(expect.arrayContaining(['completeJobsKeyless', 'completeJobsWithResultsKeyless', 'failJobs', 'snoozeJobs', 'heartbeat']));
    const { rows } = await db.query(`SELECT count(*)::int AS n, count(logs)::int AS logged FROM background_jobs WHERE id = ANY($1::int8[])`, [ids]);
    expect(rows[0]).toEqual({ n: ids.length, logged: 0 });
    const job = (await queue.get(ids[0]))!;
    expect([job.logs, job.logsDropped]).toEqual([[], 0]);
  });

  it('a snoozed run and the run after it both keep their lines (one attempt, two claims)', async () => {
    const id = await queue.enqueue('jl-snooze', {});
    await queue.waitFor(id, { timeoutMs: 10_000 });
    const job = (await queue.get(id))!;
    expect(job.logs.map((l) => [l.attempt, l.line])).toEqual([
      [1, 'before the snooze'],
      [1, 'after the snooze'],
    ]);
  });

  it('batch handlers: each job of the call keeps its own lines, whatever its outcome', async () => {
    const ids = await queue.enqueueMany([1, 2, 3].map((i) => ({ queue: 'jl-batch', payload: { i } })));
    await waitFor('the batch settled', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status IN ('completed', 'failed')`, [ids])).rows[0].n === 3);
    const jobs = await Promise.all(ids.map(async (id) => (await queue.get(id))!));
    expect(jobs.map((j) => [j.status, j.logs.map((l) => l.line)])).toEqual([
      ['completed', ['batch job 1']],
      ['failed', ['batch job 2']],
      ['completed', ['batch job 3']],
    ]);
  });

  it('transactional handlers: the lines are written with the completion in its transaction, or with the failure after the rollback', async () => {
    const id = await queue.enqueue('jl-tx', { failFirst: true });
    await queue.waitFor(id, { timeoutMs: 10_000 });
    const job = (await queue.get(id))!;
    expect(job).toMatchObject({ status: 'completed', attempts: 2 });
    expect(job.logs.map((l) => [l.attempt, l.line])).toEqual([
      [1, 'tx attempt 1'],
      [2, 'tx attempt 2'],
    ]);
  });

  it('a flow job that spawns: its lines go with the completion that creates its children', async () => {
    const flow = await queue.enqueueFlow({ jobs: [{ ref: 'parent', queue: 'jl-spawner', payload: {} }] });
    await queue.waitForFlow(flow.id, { timeoutMs: 10_000 });
    expect((await queue.get(flow.jobs.parent))!.logs.map((l) => l.line)).toEqual(['spawning a child']);
  });

  it('a write sent twice lands once: lines are numbered per claim, and a new claim numbers from 1 again', async () => {
    const store = app.get(JobStore);
    const id = await queue.enqueue('jl-manual', {});
    const claim = async () => {
      const { rows } = await db.query<{ id: string; fence_token: string }>(SQL.claimJobs, ['jl-manual', 1, 'manual', 30_000, 1, 5_000, 0, null]);
      return rows.filter((r) => r.id !== null).map((r) => ({ id: r.id, token: r.fence_token }))[0];
    };
    const held = await claim();
    expect(held.id).toBe(id);
    const beat = (lines: [number, number, string][]) => store.extendLeases('manual', 30_000, [held], [], [], [[id, { m: 10, l: lines }]]);
    expect(await beat([[1, 0, 'a'], [2, 0, 'b']])).toEqual(new Set([id]));
    await beat([[1, 0, 'a'], [2, 0, 'b']]); // its answer lost: sent again
    await beat([[2, 0, 'b'], [3, 0, 'c']]); // a line of the last write, and a new one
    expect((await stored(id))!.lines.map((l) => l.line)).toEqual(['a', 'b', 'c']);
    expect(await stored(id)).toMatchObject({ total: 3, seq: 3, claim: held.token });
    // Put back, claimed again: a new claim's line 1 is a new line.
    expect(await store.releaseJobs('manual', [{ ...held, logEntry: { m: 10, l: [[3, 0, 'c'], [4, 0, 'd']] } }])).toBe(1);
    const again = await claim();
    await store.extendLeases('manual', 30_000, [again], [], [], [[id, { m: 10, l: [[1, 60_000, 'e']] }]]);
    expect((await stored(id))!.lines.map((l) => l.line)).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(await stored(id)).toMatchObject({ total: 5, seq: 1, claim: again.token });
    // A line that waited a minute in the worker before its write is dated a minute before it, by the database clock.
    const { rows } = await db.query(`SELECT (now() - (logs -> 'lines' -> 4 ->> 'at')::timestamptz) BETWEEN interval '60 seconds' AND interval '65 seconds' AS dated FROM background_jobs WHERE id = $1`, [id]);
    expect(rows[0].dated).toBe(true);
    // A statement that is no longer this claim's (fenced out) writes nothing.
    await store.extendLeases('manual', 30_000, [held], [], [], [[id, { m: 10, l: [[9, 0, 'stale']] }]]);
    expect((await stored(id))!.lines.map((l) => l.line)).toEqual(['a', 'b', 'c', 'd', 'e']);
  });
});

@Injectable()
class HistoryHandlers {
  @JobHandler('jh-log', { maxAttempts: 1 })
  async log(job: Job<{ fail: boolean }>) {
    job.log('kept with the job');
    if (job.payload.fail) throw new Error('fails for good');
  }
}

describe('job logs go where the job goes: history, a retry from it, the pruner', () => {
  let db: pg.Pool;
  let app: INestApplicationContext;
  let queue: QueueService;
  const where = async (id: string) =>
    (await db.query(`SELECT (SELECT logs FROM background_jobs WHERE id = $1) AS hot, (SELECT logs FROM background_jobs_history WHERE id = $1) AS moved`, [id])).rows[0];

  beforeAll(async () => {
    const url = await createTestDatabase('job-logs-history');
    db = sqlPool(url);
    app = await startApp(url, {
      providers: [HistoryHandlers],
      queue: { maintenance: { completedRetentionMs: 7_200_000, failedRetentionMs: 7_200_000, history: { partitionWidth: 'hour', moveIntervalMs: 20 } } },
    });
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('moves with the job into history, comes back with a retry, and goes with the row when the pruner deletes it', async () => {
    const done = await queue.enqueue('jh-log', { fail: false });
    const failed = await queue.enqueue('jh-log', { fail: true });
    await waitFor('both moved into history', async () => (await where(done)).moved !== null && (await where(failed)).moved !== null);
    expect(await where(done)).toMatchObject({ hot: null, moved: { lines: [{ attempt: 1, line: 'kept with the job' }] } });
    expect((await queue.get(done))!.logs.map((l) => l.line)).toEqual(['kept with the job']);
    // A retry brings the job back from history, its lines with it; its new attempt's lines follow them.
    expect(await queue.retry(failed)).toBe(true);
    await waitFor('the retried job failed again', async () => (await queue.get(failed))?.status === 'failed' && (await queue.get(failed))!.logs.length === 2);
    expect((await queue.get(failed))!.logs.map((l) => [l.attempt, l.line])).toEqual([
      [1, 'kept with the job'],
      [1, 'kept with the job'],
    ]);
  });

  it('the pruner deletes a job with its lines', async () => {
    const url = await createTestDatabase('job-logs-prune');
    const pdb = sqlPool(url);
    const papp = await startApp(url, { providers: [HistoryHandlers], queue: { maintenance: { enabled: false, completedRetentionMs: 1_000 } } });
    try {
      const id = await papp.get(QueueService).enqueue('jh-log', { fail: false });
      await papp.get(QueueService).waitFor(id, { timeoutMs: 10_000 });
      expect((await pdb.query(`SELECT count(logs)::int AS n FROM background_jobs`)).rows[0].n).toBe(1);
      await pdb.query(`UPDATE background_jobs SET finished_at = now() - interval '1 hour' WHERE id = $1`, [id]);
      await papp.get(MaintenanceScheduler).pruner.runOnce();
      expect((await pdb.query(`SELECT count(*)::int AS n FROM background_jobs_all WHERE id = $1`, [id])).rows[0].n).toBe(0);
    } finally {
      await papp.close();
      await pdb.end();
    }
  });
});

describe('a migration that adds a column to the jobs tables does not break this version’s reads', () => {
  it('get(id), prepared on every connection of the API pool before the view changed, runs again unnamed', async () => {
    const url = await createTestDatabase('job-logs-stale-plan');
    const sdb = sqlPool(url);
    const sapp = await startApp(url, { queue: { workers: false, maintenance: { enabled: false }, poolSize: 3 } });
    try {
      const squeue = sapp.get(QueueService);
      const id = await squeue.enqueue('stale', { n: 1 });
      // Prepared (named pgq_getJob) on each of the pool's connections.
      await Promise.all(Array.from({ length: 12 }, () => squeue.get(id)));
      const prepared = (await sdb.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'nestjs-pg-queue api'`)).rows[0].n;
      expect(prepared).toBeGreaterThan(1);
      // What a later migration does (JobLogs1764710000000 did it with `logs`).
      await sdb.query(`ALTER TABLE background_jobs ADD COLUMN later int; ALTER TABLE background_jobs_history ADD COLUMN later int;
        CREATE OR REPLACE VIEW background_jobs_all AS SELECT * FROM background_jobs UNION ALL SELECT * FROM background_jobs_history`);
      const reads = await Promise.all(Array.from({ length: 12 }, () => squeue.get(id)));
      expect(reads.map((r) => r?.payload)).toEqual(Array.from({ length: 12 }, () => ({ n: 1 })));
    } finally {
      await sapp.close();
      await sdb.end();
    }
  });
});

describe('job logs in the testing kit', () => {
  it('drain() writes each attempt’s lines with its outcome, as the worker does, bounded by the module’s jobLogs', async () => {
    const url = await createTestDatabase('job-logs-kit');
    const app = await startTestingApp([PgQueueModule.forRoot({ connection: url, jobLogs: { maxLines: MAX_LINES, maxLineLength: MAX_LINE }, maintenance: { enabled: false } })], [Handlers]);
    try {
      const queue = app.get(QueueService);
      const retried = await queue.enqueue('jl-retry', {});
      const many = await queue.enqueue('jl-many', { n: 9 });
      await getQueueTestKit(app).drain({ queue: ['jl-retry', 'jl-many'], includeScheduled: true });
      expect((await queue.get(retried))!.logs.map((l) => [l.attempt, l.line])).toEqual([
        [1, 'attempt 1 begins'],
        [1, 'attempt 1 fails'],
        [2, 'attempt 2 begins'],
        [2, 'attempt 2 ends'],
      ]);
      expect((await queue.get(many))!).toMatchObject({ logsDropped: 4, logs: [{ line: 'line 5' }, {}, {}, {}, { line: 'line 9' }] });
    } finally {
      await app.close();
    }
  });
});
