import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, JobSnoozedError, QueueService, type Job } from 'nestjs-pg-queue';
import { JobStore } from '../src/internal.js';
import { useTestApp, waitFor } from './support/test-app.js';

const runs: { id: string; attempt: number; runAt: number }[] = [];
const release = new Map<string, () => void>();

@Injectable()
class Handlers {
  /** Snoozes 300 ms twice, then completes. maxAttempts 1: a snooze uses no attempt. */
  @JobHandler('snoozing', { maxAttempts: 1 })
  async snoozing(job: Job) {
    runs.push({ id: job.id, attempt: job.attempt, runAt: job.runAt.getTime() });
    if (runs.filter((r) => r.id === job.id).length <= 2) throw new JobSnoozedError(300);
  }

  /** Snoozes with a delay that is not one, then completes. */
  @JobHandler('bad-snooze')
  async badSnooze(job: Job) {
    runs.push({ id: job.id, attempt: job.attempt, runAt: job.runAt.getTime() });
    if (runs.filter((r) => r.id === job.id).length === 1) throw new JobSnoozedError(Number((job.payload as { delay: string }).delay));
  }

  /** Waits for the test, then snoozes. */
  @JobHandler('late-snooze')
  async lateSnooze(job: Job) {
    await new Promise<void>((resolve) => release.set(job.id, resolve));
    throw new JobSnoozedError(0);
  }
}

describe('snooze', () => {
  const t = useTestApp('snooze', { providers: [Handlers], queue: { maintenance: { enabled: false } } });
  const row = async (id: string) =>
    (await t.db.query(`SELECT status, attempts, fence_token::int AS fence_token, run_at, locked_by, last_error FROM background_jobs WHERE id = $1`, [id])).rows[0];

  it('a handler that snoozes twice then completes: ran 3 times, on attempt 1 each time, 300 ms apart at least', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('snoozing', {});
    await waitFor('completed', async () => (await row(id))?.status === 'completed');
    const mine = runs.filter((r) => r.id === id);
    expect(mine.map((r) => r.attempt)).toEqual([1, 1, 1]);
    // run_at moved by each snooze (database clock: runAt is the row's run_at at claim).
    expect(mine[1].runAt - mine[0].runAt).toBeGreaterThanOrEqual(300);
    expect(mine[2].runAt - mine[1].runAt).toBeGreaterThanOrEqual(300);
    const done = await row(id);
    expect(done).toMatchObject({ status: 'completed', attempts: 1, fence_token: 3, last_error: null });
  });

  it('a delay that is not a finite number of ms from 0 is clamped (NaN, negative: run again at once; Infinity: 365 days)', async () => {
    const queue = t.app.get(QueueService);
    for (const delay of ['NaN', '-5', 'Infinity']) {
      const id = await queue.enqueue('bad-snooze', { delay });
      if (delay === 'Infinity') {
        // The run is seen first, then the row: read the other way round, a row read before the claim (still
        // queued, run_at now) could pass once the handler had started meanwhile.
        await waitFor('snoozed', async () => runs.some((r) => r.id === id) && (await row(id))?.status === 'queued');
        expect((await row(id)).run_at.getTime() - Date.now()).toBeGreaterThan(364 * 86_400_000);
        continue;
      }
      await waitFor('completed', async () => (await row(id))?.status === 'completed');
      expect(runs.filter((r) => r.id === id).map((r) => r.attempt)).toEqual([1, 1]);
    }
  });

  it('a snooze is fenced like a failure: a stale claim’s snooze changes nothing', async () => {
    const store = t.app.get(JobStore);
    const queue = t.app.get(QueueService);
    // Two claims of one job on a queue nobody handles: the first claim's holder lost it (put back), another took it.
    const id = await queue.enqueue('nobody', {});
    const [stale] = (await store.claimJobs('nobody', 1, 'worker-a', 60_000)).jobs;
    expect(await store.releaseJobs('worker-a', [stale])).toBe(1);
    const [current] = (await store.claimJobs('nobody', 1, 'worker-b', 60_000)).jobs;
    const before = await row(id);
    expect(before).toMatchObject({ status: 'processing', attempts: 1, locked_by: 'worker-b' });

    // The stale claim snoozes: refused, whether it names its old owner or the new one.
    expect(await store.snoozeJobs('worker-a', [{ id, token: stale.token, delayMs: 1_000 }])).toEqual(new Set());
    expect(await store.snoozeJobs('worker-b', [{ id, token: stale.token, delayMs: 1_000 }])).toEqual(new Set());
    expect(await row(id)).toEqual(before);

    // The current claim snoozes: queued, the attempt given back, fence token unchanged, run_at moved.
    expect(await store.snoozeJobs('worker-b', [{ id, token: current.token, delayMs: 60_000 }])).toEqual(new Set([id]));
    const after = await row(id);
    expect(after).toMatchObject({ status: 'queued', attempts: 0, fence_token: before.fence_token });
    expect(after.run_at.getTime() - Date.now()).toBeGreaterThan(50_000);
    // And once more, late: the row is no longer in flight.
    expect(await store.snoozeJobs('worker-b', [{ id, token: current.token, delayMs: 0 }])).toEqual(new Set());
  });

  it('a handler that snoozes after its job was cancelled changes nothing', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('late-snooze', {});
    await waitFor('running', async () => release.has(id));
    expect(await queue.cancel(id)).toBe('cancelled');
    const before = await row(id);
    release.get(id)!();
    await new Promise((r) => setTimeout(r, 300));
    expect(await row(id)).toEqual(before);
    expect(before).toMatchObject({ status: 'cancelled', attempts: 1 });
  });
});
