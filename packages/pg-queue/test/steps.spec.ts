import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobAbortedError, JobHandler, JobSnoozedError, PgQueueError, QueueService, type Job } from 'nestjs-pg-queue';
import { JobStore } from '../src/internal.js';
import { createTestJob } from 'nestjs-pg-queue/testing';
import { useTestApp, waitFor } from './support/test-app.js';

// Durable steps (docs/guides/durable-steps.md), in one process: what job.step() and job.sleep() record, what a later
// attempt replays, and what is refused. Every effect a step's function has is a row of `effects`, so "ran once" is
// asserted from the table.
const gates = new Map<string, () => void>();
const failOnce = new Set<string>();
const seen: Record<string, unknown[]> = {};

@Injectable()
class Handlers {
  constructor(private readonly queue: QueueService) {}

  private effect(job: Job, step: string) {
    return this.queue['store']['pool'].query(`INSERT INTO effects (job_id, step, attempt) VALUES ($1, $2, $3)`, [job.id, step, job.attempt]);
  }

  /** Charge, ship, email: the first attempt fails after the charge (once per job id in failOnce). */
  @JobHandler('st-order', { backoff: { baseMs: 0, jitter: false } })
  async order(job: Job<{ order: number }>) {
    const charge = await job.step('charge', async () => {
      await this.effect(job, 'charge');
      return { chargeId: `ch_${job.payload.order}`, at: new Date(0) };
    });
    seen[job.id] = [...(seen[job.id] ?? []), charge];
    if (failOnce.delete(job.id)) throw new Error('shipping API down');
    const shipment = await job.step('ship', async () => {
      await this.effect(job, 'ship');
      return `sh_${job.payload.order}`;
    });
    await job.step('email', async () => {
      await this.effect(job, 'email');
    });
    return { charge, shipment };
  }

  /** A step, a durable sleep, a step. maxAttempts 1: the sleep uses no attempt. */
  @JobHandler('st-sleep', { maxAttempts: 1 })
  async sleeper(job: Job<{ ms: number }>) {
    await job.step('before', () => this.effect(job, 'before').then(() => 1));
    await job.sleep('nap', job.payload.ms);
    await job.step('after', () => this.effect(job, 'after').then(() => 2));
  }

  /** What each payload asks: a bad step of some kind. */
  @JobHandler('st-bad', { maxAttempts: 3, backoff: { baseMs: 0, jitter: false } })
  async bad(job: Job<{ kind: string }>) {
    switch (job.payload.kind) {
      case 'twice':
        await job.step('a', () => 1);
        await job.step('a', () => 2);
        return;
      case 'bigint':
        await job.step('big', () => 10n);
        return;
      case 'throws':
        await job.step('boom', async () => {
          await this.effect(job, 'boom');
          if (job.attempt === 1) throw new Error('step failed');
          return 'ok';
        });
        return;
      case 'no-name':
        await job.step('', () => 1);
        return;
      case 'bad-sleep':
        await job.sleep('z', -1);
        return;
    }
  }

  /** Waits inside its step's function for the test, then returns. */
  @JobHandler('st-held', { maxAttempts: 1 })
  async held(job: Job) {
    try {
      await job.step('slow', async () => {
        await this.effect(job, 'slow');
        await new Promise<void>((resolve) => gates.set(job.id, resolve));
        return 'done';
      });
    } catch (error) {
      seen[job.id] = [error];
      throw error;
    }
  }

  /** Fails for good after one step (maxAttempts 1), for retry(). */
  @JobHandler('st-dead', { maxAttempts: 1 })
  async dead(job: Job) {
    await job.step('once', () => this.effect(job, 'once').then(() => 'kept'));
    if (!failOnce.has('retried')) throw new Error('dead letter');
  }

  /** Read ahead into the buffer, then started: its step marks the row started and charged before any heartbeat. */
  @JobHandler('st-buffered', { concurrency: 1, prefetch: 5 })
  async buffered(job: Job) {
    await job.step('mark', () => 'm');
    await new Promise<void>((resolve) => gates.set(job.id, resolve));
  }
}

describe('durable steps', () => {
  const t = useTestApp('steps', { providers: [Handlers], queue: { heartbeatMs: 10_000, maintenance: { enabled: false } } }, (db) =>
    db.query(`CREATE TABLE effects (job_id int8, step text, attempt int)`),
  );
  const effects = async (id: string) => (await t.db.query(`SELECT step, attempt FROM effects WHERE job_id = $1 ORDER BY step, attempt`, [id])).rows;
  const row = async (id: string) => (await t.db.query(`SELECT status, attempts, buffered, steps, last_error, run_at FROM background_jobs WHERE id = $1`, [id])).rows[0];

  it('a retry resumes after the recorded step: each step function ran once, and the replay returns the stored result', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('st-order', { order: 7 });
    failOnce.add(id);
    const result = await queue.waitFor(id, { timeoutMs: 10_000 });
    expect(result).toEqual({ charge: { chargeId: 'ch_7', at: '1970-01-01T00:00:00.000Z' }, shipment: 'sh_7' });
    // The first run saw the JSON round trip too (a Date as its string), so both attempts saw the same value.
    expect(seen[id]).toEqual([{ chargeId: 'ch_7', at: '1970-01-01T00:00:00.000Z' }, { chargeId: 'ch_7', at: '1970-01-01T00:00:00.000Z' }]);
    expect(await effects(id)).toEqual([{ step: 'charge', attempt: 1 }, { step: 'email', attempt: 2 }, { step: 'ship', attempt: 2 }]);
    const record = await queue.get(id);
    expect(record).toMatchObject({ status: 'completed', attempts: 2 });
    expect(record!.steps.map(({ name, kind, attempt, result }) => ({ name, kind, attempt, result }))).toEqual([
      { name: 'charge', kind: 'step', attempt: 1, result: { chargeId: 'ch_7', at: '1970-01-01T00:00:00.000Z' } },
      { name: 'ship', kind: 'step', attempt: 2, result: 'sh_7' },
      { name: 'email', kind: 'step', attempt: 2, result: undefined },
    ]);
    expect('result' in record!.steps[2]).toBe(false);
    expect(record!.steps.every((s) => s.at instanceof Date && s.at.getTime() <= Date.now() + 60_000)).toBe(true);
  });

  it('job.sleep ends the attempt uncharged and the next run passes it after the stored steps, by the database clock', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('st-sleep', { ms: 400 });
    await waitFor('asleep', async () => (await row(id))?.status === 'queued' && (await row(id)).steps?.length === 2);
    const asleep = await row(id);
    expect(asleep).toMatchObject({ status: 'queued', attempts: 0 });
    const nap = asleep.steps[1];
    expect(nap).toMatchObject({ name: 'nap', attempt: 1 });
    // run_at is the sleep's end, give or take the time between the record and the snooze.
    expect(Math.abs(asleep.run_at.getTime() - Date.parse(nap.until))).toBeLessThan(1_000);
    expect(Date.parse(nap.until) - Date.parse(nap.at)).toBe(400);
    await queue.waitFor(id, { timeoutMs: 10_000 });
    expect(await effects(id)).toEqual([{ step: 'after', attempt: 1 }, { step: 'before', attempt: 1 }]);
    const done = await queue.get(id);
    expect(done).toMatchObject({ status: 'completed', attempts: 1 });
    expect(done!.steps.map((s) => [s.name, s.kind])).toEqual([['before', 'step'], ['nap', 'sleep'], ['after', 'step']]);
    expect(done!.steps[1].until).toBeInstanceOf(Date);
  });

  it('a sleep woken early (run now) sleeps out the rest, uncharged', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('st-sleep', { ms: 1_500 });
    await waitFor('asleep', async () => (await row(id))?.steps?.length === 2 && (await row(id)).status === 'queued');
    const until = Date.parse((await row(id)).steps[1].until);
    // As the dashboard's "Run now" does: due now, and the workers told.
    await t.db.query(`WITH due AS (UPDATE background_jobs SET run_at = now() WHERE id = $1 RETURNING queue_name) SELECT pg_notify('pg_queue_jobs', queue_name) FROM due`, [id]);
    await waitFor('snoozed again', async () => (await row(id)).run_at.getTime() > Date.now() + 200 || (await row(id)).status === 'completed', 5_000);
    const again = await row(id);
    expect(again.status).toBe('queued');
    expect(Math.abs(again.run_at.getTime() - until)).toBeLessThan(100);
    await queue.waitFor(id, { timeoutMs: 10_000 });
    expect((await row(id)).attempts).toBe(1);
    expect(await effects(id)).toEqual([{ step: 'after', attempt: 1 }, { step: 'before', attempt: 1 }]);
  });

  it('refuses bad steps with errors that name them: a repeated name, an empty name, a bad sleep; a result that is not JSON fails the job for good', async () => {
    const queue = t.app.get(QueueService);
    const ids = Object.fromEntries(await Promise.all(['twice', 'bigint', 'no-name', 'bad-sleep'].map(async (kind) => [kind, await queue.enqueue('st-bad', { kind })])));
    for (const id of Object.values(ids) as string[]) await waitFor('failed', async () => (await row(id))?.status === 'failed');
    expect((await row(ids.twice)).last_error).toMatch(/"a" was already used by a step or sleep of this attempt/);
    expect((await row(ids['no-name'])).last_error).toMatch(/a step needs a name of 1 to 200 characters; got 0 characters/);
    expect((await row(ids['bad-sleep'])).last_error).toMatch(/sleep "z" needs a number of ms from 0/);
    const big = await row(ids.bigint);
    expect(big).toMatchObject({ status: 'failed', attempts: 1, steps: null });
    expect(big.last_error).toMatch(/step "big" returned a result that cannot be stored: it is not JSON \(a BigInt/);
  });

  it('a step that throws records nothing: the retry runs it again', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('st-bad', { kind: 'throws' });
    await queue.waitFor(id, { timeoutMs: 10_000 });
    expect(await effects(id)).toEqual([{ step: 'boom', attempt: 1 }, { step: 'boom', attempt: 2 }]);
    expect((await queue.get(id))!.steps.map((s) => [s.name, s.attempt, s.result])).toEqual([['boom', 2, 'ok']]);
  });

  it('a step whose attempt lost the job (cancelled while its function ran) is not recorded, and the handler is told', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('st-held', {});
    await waitFor('in the step', async () => gates.has(id));
    expect(await queue.cancel(id)).toBe('cancelled');
    gates.get(id)!();
    await waitFor('told', async () => seen[id] !== undefined);
    expect(seen[id][0]).toBeInstanceOf(JobAbortedError);
    expect(String((seen[id][0] as Error).message)).toMatch(/step "slow" ran but was not recorded: this attempt no longer holds the job/);
    expect(await row(id)).toMatchObject({ status: 'cancelled', steps: null });
    expect(await effects(id)).toEqual([{ step: 'slow', attempt: 1 }]);
  });

  it('a step record is fenced by the claim: a stale token or another worker is refused, the holder is not', async () => {
    const store = t.app.get(JobStore);
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('nobody-steps', {});
    const [stale] = (await store.claimJobs('nobody-steps', 1, 'worker-a', 60_000)).jobs;
    expect(await store.releaseJobs('worker-a', [stale])).toBe(1);
    const [current] = (await store.claimJobs('nobody-steps', 1, 'worker-b', 60_000)).jobs;
    expect(await store.steps.recordStep('worker-a', stale, '{"name":"x"}', null)).toBeUndefined();
    expect(await store.steps.recordStep('worker-b', stale, '{"name":"x"}', null)).toBeUndefined();
    expect(await store.steps.recordStep('worker-a', current, '{"name":"x"}', null)).toBeUndefined();
    expect((await row(id)).steps).toBeNull();
    expect(await store.steps.recordStep('worker-b', current, '{"name":"x","result":1}', null)).toEqual(expect.any(Number));
    expect((await row(id)).steps).toEqual([{ name: 'x', result: 1, attempt: 1, at: expect.any(String) }]);
  });

  it('retry() of a dead letter keeps its steps (the step does not run again); resetSteps: true runs it again', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('st-dead', {});
    await waitFor('dead', async () => (await row(id))?.status === 'failed');
    expect(await queue.retry(id)).toBe(true);
    // The retried attempt has ended once its failure is in the attempt history (the second row): whatever its step did, it did before.
    await waitFor('dead again', async () =>
      (await t.db.query(`SELECT count(*)::int AS n FROM background_job_attempts WHERE job_id = $1 AND outcome = 'failed'`, [id])).rows[0].n === 2);
    expect(await row(id)).toMatchObject({ status: 'failed', attempts: 1 });
    expect(await effects(id)).toEqual([{ step: 'once', attempt: 1 }]);
    await expect(queue.retry(id, { resetSteps: 'yes' as never })).rejects.toThrow(/resetSteps must be true or false/);
    failOnce.add('retried');
    expect(await queue.retry(id, { resetSteps: true })).toBe(true);
    await queue.waitFor(id, { timeoutMs: 10_000 });
    expect(await effects(id)).toEqual([{ step: 'once', attempt: 1 }, { step: 'once', attempt: 1 }]);
    expect((await queue.get(id))!.steps.map((s) => s.name)).toEqual(['once']);
    failOnce.delete('retried');
  });

  it('a job started from the read-ahead buffer is marked started and charged by its first step, before any heartbeat', async () => {
    const queue = t.app.get(QueueService);
    const [first, second] = await queue.enqueueMany([{ queue: 'st-buffered', payload: {} }, { queue: 'st-buffered', payload: {} }]);
    await waitFor('first running', async () => gates.has(first));
    gates.get(first)!();
    await waitFor('second running', async () => gates.has(second));
    // heartbeatMs is 10 s: only the step can have told the row.
    const r = await row(second);
    expect(r).toMatchObject({ status: 'processing', attempts: 1, buffered: false });
    gates.get(second)!();
    await queue.waitFor(second, { timeoutMs: 10_000 });
  });

  it('createTestJob: steps given are replayed without running; steps run are kept in memory; sleep throws a JobSnoozedError', async () => {
    const ran: string[] = [];
    const job = createTestJob({}, { steps: { charge: { id: 'ch_1' } } });
    expect(await job.step('charge', () => (ran.push('charge'), { id: 'other' }))).toEqual({ id: 'ch_1' });
    expect(await job.step('ship', () => (ran.push('ship'), 'sh'))).toBe('sh');
    await expect(job.sleep('wait', 1_000)).rejects.toBeInstanceOf(JobSnoozedError);
    await expect(job.step('ship', () => 1)).rejects.toBeInstanceOf(PgQueueError);
    expect(ran).toEqual(['ship']);
    expect(job.recordedSteps()).toEqual([{ name: 'charge', result: { id: 'ch_1' } }, { name: 'ship', result: 'sh' }, { name: 'wait' }]);
  });
});
