import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { DataSource } from 'typeorm';
import { JobHandler, JobSnoozedError, PgQueueModule, QueueService, RecurringJob, type Job } from 'nestjs-pg-queue';
import { createTestJob, getQueueTestKit, overrideQueueForTesting, QueueAssertionError, type QueueTestKit } from 'nestjs-pg-queue/testing';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool } from './support/test-app.js';
import { startTestingApp } from './support/testing-app.js';

// The testing kit (nestjs-pg-queue/testing) on real PostgreSQL: an app module as an app writes it, made
// testable by overrideQueueForTesting, driven by the kit; every assertion reads the rows.

const runs: { queue: string; id: string; attempt: number; payload: unknown }[] = [];
/** How many times each `flaky` job (by payload.key) still fails. */
const failuresLeft = new Map<string, number>();

const gates = new Map<string, () => void>();

@Injectable()
class Handlers {
  constructor(private readonly queue: QueueService) {}

  @JobHandler('mail')
  async mail(job: Job<{ to: string; followUp?: boolean }>) {
    runs.push({ queue: 'mail', id: job.id, attempt: job.attempt, payload: job.payload });
    if (job.payload.followUp) await this.queue.enqueue('audit', { mailed: job.payload.to });
  }

  @JobHandler('audit')
  audit(job: Job) {
    runs.push({ queue: 'audit', id: job.id, attempt: job.attempt, payload: job.payload });
    return { audited: true };
  }

  /** Fails as many times as failuresLeft says, then completes; 3 attempts, retries 1 minute apart. */
  @JobHandler('flaky', { maxAttempts: 3, backoff: () => 60_000 })
  flaky(job: Job<{ key: string }>) {
    runs.push({ queue: 'flaky', id: job.id, attempt: job.attempt, payload: job.payload });
    const left = failuresLeft.get(job.payload.key) ?? 0;
    if (left > 0) {
      failuresLeft.set(job.payload.key, left - 1);
      throw new Error(`remote said no (${job.payload.key})`);
    }
  }

  /** Snoozes 10 minutes on its first run, then completes. */
  @JobHandler('snoozy', { maxAttempts: 1 })
  snoozy(job: Job) {
    const first = !runs.some((r) => r.id === job.id);
    runs.push({ queue: 'snoozy', id: job.id, attempt: job.attempt, payload: job.payload });
    if (first) throw new JobSnoozedError(600_000);
  }

  /** Waits until the test opens its gate. */
  @JobHandler('gated')
  async gated(job: Job) {
    await new Promise<void>((resolve) => gates.set(job.id, resolve));
  }

  /** A schedule due every second: on the wall clock it would fire during any test. */
  @RecurringJob('* * * * * *', { name: 'every-second-digest', payload: { kind: 'digest' }, priority: 3 })
  @JobHandler('digest', { maxAttempts: 2 })
  digest(job: Job) {
    runs.push({ queue: 'digest', id: job.id, attempt: job.attempt, payload: job.payload });
  }

  @JobHandler('slow', { maxAttempts: 1, timeoutMs: 200 })
  async slow(job: Job) {
    await new Promise((resolve) => setTimeout(resolve, 5_000).unref());
    runs.push({ queue: 'slow', id: job.id, attempt: job.attempt, payload: job.payload });
  }
}

function bootApp(url: string, mode: 'manual' | 'inline', withTypeOrm = false): Promise<INestApplicationContext> {
  const imports = withTypeOrm
    ? [TypeOrmModule.forRoot({ type: 'postgres', url }), PgQueueModule.forRoot({ maintenance: { enabled: false } })]
    : [PgQueueModule.forRoot({ connection: url, maintenance: { enabled: false } })];
  return startTestingApp(imports, [Handlers], mode);
}

describe('testing kit, manual mode', () => {
  let app: INestApplicationContext;
  let kit: QueueTestKit;
  let queue: QueueService;
  let db: pg.Pool;
  const row = async (id: string) =>
    (await db.query(`SELECT status, attempts, last_error, run_at > now() AS later, extract(epoch FROM run_at - now()) AS in_s FROM background_jobs WHERE id = $1`, [id])).rows[0];

  beforeAll(async () => {
    const url = await createTestDatabase('testing-kit');
    db = sqlPool(url);
    app = await bootApp(url, 'manual');
    kit = getQueueTestKit(app);
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });
  beforeEach(async () => {
    runs.length = 0;
    await kit.clear();
  });

  it('runs nothing by itself: no LISTEN connection, and a job enqueued stays queued', async () => {
    const id = await queue.enqueue('mail', { to: 'ada@example.com' });
    await new Promise((r) => setTimeout(r, 300));
    expect(runs).toEqual([]);
    expect(await row(id)).toMatchObject({ status: 'queued', attempts: 0 });
    const { rows } = await db.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'`);
    expect(rows).toEqual([]);
  });

  it('drain() runs every due job through the real handlers, follow-ups included, and says how each ended', async () => {
    const a = await queue.enqueue('mail', { to: 'ada@example.com', followUp: true });
    const b = await queue.enqueue('mail', { to: 'bob@example.com' });
    const later = await queue.enqueue('mail', { to: 'later@example.com' }, { delayMs: 3_600_000 });
    const drained = await kit.drain();
    // Queues take turns, one job each per pass: ada's mail, the audit job it enqueued, then bob's mail.
    expect(drained.map((d) => [d.queue, d.outcome])).toEqual([
      ['mail', 'completed'],
      ['audit', 'completed'],
      ['mail', 'completed'],
    ]);
    expect(drained[0]).toMatchObject({ id: a, attempt: 1, payload: { to: 'ada@example.com', followUp: true } });
    expect(drained[2].id).toBe(b);
    expect(await row(a)).toMatchObject({ status: 'completed', attempts: 1 });
    expect(await row(later)).toMatchObject({ status: 'queued', attempts: 0, later: true });
    // The kit's records are get()'s: the stored result too.
    const audit = (await kit.jobs()).find((j) => j.queue === 'audit')!;
    expect(audit).toMatchObject({ status: 'completed', result: { audited: true } });
    expect(audit).toEqual(await queue.get(audit.id));
    // Nothing left due: a second drain runs nothing.
    expect(await kit.drain()).toEqual([]);
  });

  it('drain() runs a flow to its end: each dependent once its parents completed', async () => {
    const flow = await app.get(QueueService).enqueueFlow({
      jobs: [
        { ref: 'first', queue: 'mail', payload: { to: 'flow-1@example.com' } },
        { ref: 'second', queue: 'audit', payload: { step: 2 }, dependsOn: ['first'] },
        { ref: 'third', queue: 'mail', payload: { to: 'flow-3@example.com' }, dependsOn: ['second'] },
      ],
    });
    const drained = await kit.drain();
    expect(drained.map((d) => [d.queue, d.outcome])).toEqual([
      ['mail', 'completed'],
      ['audit', 'completed'],
      ['mail', 'completed'],
    ]);
    expect((await app.get(QueueService).getFlow(flow.id))?.status).toBe('completed');
  });

  it('recurring schedules never fire by themselves; fireSchedule enqueues the fire a tick would, and drain runs it', async () => {
    // The schedule was synced at boot (so schedules() sees it) and has been due every second since.
    const [schedule] = await queue.schedules();
    expect(schedule).toMatchObject({ name: 'every-second-digest', queue: 'digest', source: 'code' });
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await kit.drain()).toEqual([]);
    expect((await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'digest'`)).rows[0].n).toBe(0);

    const id = await kit.fireSchedule('every-second-digest');
    const { rows } = await db.query(
      `SELECT payload, priority, max_attempts, status, abs(extract(epoch FROM run_at - now())) < 5 AS now_ish FROM background_jobs WHERE id = $1`,
      [id],
    );
    expect(rows[0]).toMatchObject({ priority: 3, max_attempts: 2, status: 'queued', now_ish: true });
    expect(rows[0].payload).toMatchObject({ kind: 'digest', _schedule: { name: 'every-second-digest', fireAt: expect.any(String) } });
    expect(await kit.drain()).toEqual([expect.objectContaining({ id, queue: 'digest', outcome: 'completed' })]);
    // The schedule row is not moved by a test fire.
    expect((await queue.schedule('every-second-digest'))?.nextFireAt?.getTime()).toBe(schedule.nextFireAt!.getTime());

    await expect(kit.fireSchedule('nightly')).rejects.toThrow('fireSchedule: no recurring schedule is named "nightly" (schedules: "every-second-digest").');
  });

  it('drain({ queue }) runs only that queue; an unknown queue is an error naming the handled ones', async () => {
    await queue.enqueue('mail', { to: 'ada@example.com', followUp: true });
    expect((await kit.drain({ queue: 'mail' })).map((d) => d.queue)).toEqual(['mail']);
    await kit.expectEnqueued('audit', { mailed: 'ada@example.com' }, { status: 'queued' });
    await expect(kit.drain({ queue: 'nope' })).rejects.toThrow(/no @JobHandler handles queue "nope" in this app \(handlers: "mail", "audit", "flaky"/);
  });

  it('a failure is retried on the backoff schedule; advanceBy makes the retry due; the last failure dead-letters', async () => {
    failuresLeft.set('k1', 5);
    const id = await queue.enqueue('flaky', { key: 'k1' });
    const [first] = await kit.drain();
    expect(first).toMatchObject({ id, outcome: 'retried', attempt: 1, retryInMs: 60_000 });
    expect((first.error as Error).message).toBe('remote said no (k1)');
    const queued = await row(id);
    expect(queued).toMatchObject({ status: 'queued', attempts: 1, later: true, last_error: expect.stringContaining('remote said no (k1)') });
    expect(Number(queued.in_s)).toBeGreaterThan(55);

    // Not due yet: half the delay is not enough; the full delay is.
    expect(await kit.drain({ advanceBy: 30_000 })).toEqual([]);
    expect((await kit.drain({ advanceBy: 30_000 })).map((d) => [d.attempt, d.outcome])).toEqual([[2, 'retried']]);
    expect((await kit.drain({ includeScheduled: true })).map((d) => [d.attempt, d.outcome])).toEqual([[3, 'failed']]);
    expect(await row(id)).toMatchObject({ status: 'failed', attempts: 3 });
  });

  it('includeScheduled runs retries until the job completes', async () => {
    failuresLeft.set('k2', 2);
    const id = await queue.enqueue('flaky', { key: 'k2' });
    const drained = await kit.drain({ includeScheduled: true });
    expect(drained.map((d) => [d.id, d.attempt, d.outcome])).toEqual([
      [id, 1, 'retried'],
      [id, 2, 'retried'],
      [id, 3, 'completed'],
    ]);
    expect(await row(id)).toMatchObject({ status: 'completed', attempts: 3 });
  });

  it('makeDue() moves delayed jobs to now; a snooze is reported and its attempt not counted', async () => {
    const id = await queue.enqueue('snoozy', { n: 1 }, { delayMs: 86_400_000 });
    expect(await kit.drain()).toEqual([]);
    expect(await kit.makeDue('snoozy')).toBe(1);
    const [snoozed] = await kit.drain();
    expect(snoozed).toMatchObject({ id, outcome: 'snoozed', snoozeMs: 600_000, attempt: 1 });
    expect(snoozed.error).toBeInstanceOf(JobSnoozedError);
    expect(await row(id)).toMatchObject({ status: 'queued', attempts: 0, later: true });
    const [done] = await kit.drain({ advanceBy: 600_000 });
    expect(done).toMatchObject({ id, outcome: 'completed', attempt: 1 });
    expect(await row(id)).toMatchObject({ status: 'completed', attempts: 1 });
  });

  it('a handler past its timeoutMs fails with JobTimeoutError (its signal aborted), as with workers', async () => {
    const id = await queue.enqueue('slow', {});
    const [timedOut] = await kit.drain();
    expect(timedOut).toMatchObject({ id, outcome: 'failed' });
    expect((timedOut.error as Error).name).toBe('JobTimeoutError');
    expect(await row(id)).toMatchObject({ status: 'failed', last_error: expect.stringMatching(/timed out|timeout/i) });
  });

  it('a job cancelled while the drain runs it ends "discarded": the fenced settle changed nothing', async () => {
    const id = await queue.enqueue('gated', {});
    const draining = kit.drain({ queue: 'gated' });
    while (!gates.has(id)) await new Promise((r) => setTimeout(r, 10));
    expect(await queue.cancel(id)).toBe('cancelled');
    gates.get(id)!();
    expect(await draining).toEqual([expect.objectContaining({ id, outcome: 'discarded' })]);
    expect(await row(id)).toMatchObject({ status: 'cancelled', attempts: 1 });
  });

  it('a paused queue is not drained until resumed; clear() drops jobs and paused flags alike', async () => {
    await queue.pause('mail');
    const id = await queue.enqueue('mail', { to: 'paused@example.com' });
    expect(await kit.drain()).toEqual([]);
    await queue.resume('mail');
    expect(await kit.drain()).toEqual([expect.objectContaining({ id, outcome: 'completed' })]);
    await queue.pause('audit');
    expect(await kit.clear()).toBe(1);
    expect(await queue.pausedQueues()).toEqual([]);
    expect(await kit.jobs()).toEqual([]);
  });

  it('drain stops at maxJobs with an error and leaves the next job queued, unrun', async () => {
    for (let i = 0; i < 3; i++) await queue.enqueue('mail', { to: `${i}@example.com` });
    await expect(kit.drain({ maxJobs: 2 })).rejects.toThrow(/^drain ran 2 jobs \(mail, audit, .*\) and jobs are still due/);
    expect(runs).toHaveLength(2);
    const { rows } = await db.query(`SELECT status, attempts FROM background_jobs WHERE queue_name = 'mail' AND status = 'queued'`);
    expect(rows).toEqual([{ status: 'queued', attempts: 0 }]);
    await expect(kit.drain({ advanceBy: -1 })).rejects.toThrow(/advanceBy must be a non-negative integer/);
  });

  it('expectEnqueued passes on a partial payload (Jest matchers too) and returns the job', async () => {
    const id = await queue.enqueue('mail', { to: 'ada@example.com', meta: { lang: 'en', tags: ['a', 'b'] } });
    const job = await kit.expectEnqueued('mail', { to: 'ada@example.com' });
    expect(job).toMatchObject({ id, queue: 'mail', status: 'queued' });
    await kit.expectEnqueued('mail', { meta: { lang: 'en' } });
    await kit.expectEnqueued('mail', { to: expect.stringContaining('@example.com'), meta: { tags: ['a', 'b'] } });
    await kit.expectEnqueued('mail');
    await kit.expectNotEnqueued('mail', { to: 'bob@example.com' });
    await kit.expectNotEnqueued('audit');
    // Still "enqueued" once run, unless a status is asked for.
    await kit.drain({ queue: 'mail' });
    await kit.expectEnqueued('mail', { to: 'ada@example.com' });
    await kit.expectNotEnqueued('mail', { to: 'ada@example.com' }, { status: 'queued' });
  });

  it('expectEnqueued fails with a message that lists the queue and a diff against the closest job', async () => {
    const a = await queue.enqueue('mail', { to: 'ada@example.com', subject: 'Order #1' });
    await queue.enqueue('mail', { to: 'bob@example.com', subject: 'Order #2' });
    const failure = await kit.expectEnqueued('mail', { to: 'ada@example.com', subject: 'Order #2' }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(QueueAssertionError);
    const message = (failure as Error).message;
    expect(message).toContain(`expected a job in queue "mail" with payload matching { to: 'ada@example.com', subject: 'Order #2' }`);
    expect(message).toContain('queue "mail" holds 2 job(s):');
    expect(message).toMatch(new RegExp(`job ${a} \\(queued, attempt 0/5\\): \\{ to: 'ada@example.com', subject: 'Order #1' \\}`));
    // Jest's own diff, against the job that matches most keys (ada's: `to` matches).
    expect(message).toContain(`closest, job ${a}:`);
    expect(message).toContain('toMatchObject');
    expect(message).toMatch(/-\s+"subject": "Order #2"/);
    expect(message).toMatch(/\+\s+"subject": "Order #1"/);

    const empty = await kit.expectEnqueued('audit', { mailed: 'x' }).catch((e: unknown) => e);
    expect((empty as Error).message).toBe(`expected a job in queue "audit" with payload matching { mailed: 'x' }; queue "audit" holds no job.`);

    const unwanted = await kit.expectNotEnqueued('mail', { to: 'bob@example.com' }).catch((e: unknown) => e);
    expect((unwanted as Error).message).toMatch(/^expected no job in queue "mail" with payload matching \{ to: 'bob@example.com' \}, found 1 \(\d+\); queue "mail" holds 2 job\(s\)/);
  });

  it('getQueueTestKit names the fix when the app was not built for testing', () => {
    // A plain app's WorkerPool (here: none found, or another object) is not the testing one.
    const missing = { get: () => { throw new Error('Nest could not find WorkerPool'); } } as unknown as INestApplicationContext;
    expect(() => getQueueTestKit(missing)).toThrow(/not built with overrideQueueForTesting\(\)/);
    expect(() => getQueueTestKit({ get: () => ({}) } as unknown as INestApplicationContext)).toThrow(/Test\.createTestingModule\(\{ imports: \[AppModule\] \}\)/);
    expect(() => overrideQueueForTesting(Test.createTestingModule({}), { mode: 'auto' as never })).toThrow(/mode must be "manual" or "inline", got "auto"/);
  });
});

describe('testing kit, inline mode', () => {
  let app: INestApplicationContext;
  let kit: QueueTestKit;
  let queue: QueueService;
  let db: pg.Pool;
  const status = async (id: string) => (await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0]?.status;

  beforeAll(async () => {
    const url = await createTestDatabase('testing-kit-inline');
    db = sqlPool(url);
    app = await bootApp(url, 'inline', true);
    kit = getQueueTestKit(app);
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    const dataSource = app?.get(DataSource);
    await app?.close();
    await db?.end();
    // The commit hook leaves the app's DataSource at close.
    expect(dataSource?.subscribers).toEqual([]);
  });
  beforeEach(async () => {
    runs.length = 0;
    await kit.clear();
  });

  it('enqueue runs the job (and the job it enqueues) before it returns', async () => {
    const id = await queue.enqueue('mail', { to: 'ada@example.com', followUp: true });
    expect(runs.map((r) => [r.queue, r.payload])).toEqual([
      ['mail', { to: 'ada@example.com', followUp: true }],
      ['audit', { mailed: 'ada@example.com' }],
    ]);
    expect(await status(id)).toBe('completed');
    await kit.expectEnqueued('audit', { mailed: 'ada@example.com' }, { status: 'completed' });
  });

  it('enqueueMany and enqueueUnique run theirs too; a delayed job waits for the clock', async () => {
    await queue.enqueueMany([
      { queue: 'mail', payload: { to: 'a@example.com' } },
      { queue: 'flaky', payload: { key: 'many' } },
      { queue: 'mail', payload: { to: 'later@example.com' }, delayMs: 60_000 },
    ]);
    await queue.enqueueUnique('mail', { to: 'u@example.com' }, { uniqueKey: 'u' });
    expect(runs.map((r) => r.payload)).toEqual([{ to: 'a@example.com' }, { key: 'many' }, { to: 'u@example.com' }]);
    expect((await kit.drain({ advanceBy: 60_000 })).map((d) => d.payload)).toEqual([{ to: 'later@example.com' }]);
  });

  it('a failing job is retried later, not thrown at the caller (as in production)', async () => {
    failuresLeft.set('inline', 1);
    const id = await queue.enqueue('flaky', { key: 'inline' });
    expect(await status(id)).toBe('queued');
    expect((await kit.drain({ includeScheduled: true })).map((d) => d.outcome)).toEqual(['completed']);
  });

  it('an enqueue inside a transaction runs its job when the transaction commits, before transaction() returns', async () => {
    const dataSource = app.get(DataSource);
    const id = await dataSource.transaction(async (manager) => {
      const jobId = await queue.enqueue('mail', { to: 'tx@example.com', followUp: true }, { manager });
      // Not yet: the row is not committed, and rolls back with the caller.
      expect(runs).toEqual([]);
      expect(await status(jobId)).toBeUndefined();
      return jobId;
    });
    expect(runs.map((r) => r.queue)).toEqual(['mail', 'audit']);
    expect(await status(id)).toBe('completed');
    expect(await kit.drain()).toEqual([]);
  });

  it('a savepoint released is not the commit; a rollback runs nothing and leaves nothing', async () => {
    const dataSource = app.get(DataSource);
    await dataSource.transaction(async (outer) => {
      await outer.transaction(async (inner) => {
        await queue.enqueue('mail', { to: 'nested@example.com' }, { manager: inner });
      });
      expect(runs).toEqual([]); // RELEASE SAVEPOINT: still uncommitted
    });
    expect(runs.map((r) => r.payload)).toEqual([{ to: 'nested@example.com' }]);

    runs.length = 0;
    await expect(
      dataSource.transaction(async (manager) => {
        await queue.enqueue('mail', { to: 'rolled-back@example.com' }, { manager });
        throw new Error('rollback');
      }),
    ).rejects.toThrow('rollback');
    expect(runs).toEqual([]);
    await kit.expectNotEnqueued('mail', { to: 'rolled-back@example.com' });
  });

  it('an enqueue with a manager outside any transaction runs at once', async () => {
    const id = await queue.enqueue('mail', { to: 'plain-manager@example.com' }, { manager: app.get(DataSource).manager });
    expect(await status(id)).toBe('completed');
  });
});

describe('createTestJob (a handler called directly, no database)', () => {
  it('is the Job a handler receives: payload, attempt, dates, a signal the test can abort', async () => {
    const job = createTestJob({ to: 'ada@example.com' }, { queue: 'mail', attempt: 2, maxAttempts: 3, runAt: new Date('2030-01-01T00:00:00Z') });
    const { id, queue, payload, attempt, maxAttempts, priority, runAt, createdAt } = job;
    expect({ id, queue, payload, attempt, maxAttempts, priority, runAt, createdAt }).toEqual({
      id: '1',
      queue: 'mail',
      payload: { to: 'ada@example.com' },
      attempt: 2,
      maxAttempts: 3,
      priority: 0,
      runAt: new Date('2030-01-01T00:00:00Z'),
      createdAt: new Date('2030-01-01T00:00:00Z'),
    });
    runs.length = 0;
    await new Handlers({} as QueueService).mail(createTestJob({ to: 'bob@example.com' }));
    expect(runs).toEqual([{ queue: 'mail', id: '1', attempt: 1, payload: { to: 'bob@example.com' } }]);
    const signal = job.signal;
    job.abort(new Error('cancelled by the test'));
    expect(signal.aborted).toBe(true);
    expect((signal.reason as Error).message).toBe('cancelled by the test');
  });
});
