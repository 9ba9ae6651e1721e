import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobEvents, JobHandler, QueueService, type Job, type JobEvent } from 'nestjs-pg-queue';
import { useTestApp, waitFor } from './support/test-app.js';

const release = new Map<string, () => void>();

@Injectable()
class Handlers {
  @JobHandler('ev-ok')
  async ok(job: Job<{ n: number }>) {
    return { doubled: job.payload.n * 2 };
  }

  @JobHandler('ev-fail', { maxAttempts: 2, backoff: { baseMs: 10, maxMs: 10, jitter: false } })
  async fail() {
    throw new Error('boom');
  }

  @JobHandler('ev-hang')
  async hang(job: Job) {
    await new Promise<void>((resolve) => {
      release.set(job.id, resolve);
      job.signal.addEventListener('abort', () => resolve());
    });
  }
}

describe('JobEvents: the in-process event stream of this instance’s workers', () => {
  const t = useTestApp('jobevents', { providers: [Handlers], queue: { maintenance: { enabled: false } } });
  const row = async (id: string) => (await t.db.query(`SELECT status, attempts FROM background_jobs WHERE id = $1`, [id])).rows[0];

  it('completed carries the handler’s result; a failing job emits failed+retrying, then failed+dead; a throwing listener breaks nothing', async () => {
    const events = t.app.get(JobEvents);
    const seen: JobEvent[] = [];
    const stopSeeing = events.listen((e) => seen.push(e));
    const stopThrowing = events.listen(() => {
      throw new Error('listener bug');
    });
    try {
      const queue = t.app.get(QueueService);
      const ok = await queue.enqueue('ev-ok', { n: 21 });
      const bad = await queue.enqueue('ev-fail', {});
      await waitFor('both settled', async () => (await row(ok))?.status === 'completed' && (await row(bad))?.status === 'failed');
      await waitFor('events seen', async () => seen.some((e) => e.name === 'dead'));
      const of = (id: string) => seen.filter((e) => e.job.id === id).map((e) => e.name);
      expect(of(ok)).toEqual(['active', 'completed']);
      expect(seen.find((e) => e.job.id === ok && e.name === 'completed')?.result).toEqual({ doubled: 42 });
      expect(of(bad)).toEqual(['active', 'failed', 'retrying', 'active', 'failed', 'dead']);
      const retrying = seen.find((e) => e.job.id === bad && e.name === 'retrying')!;
      expect((retrying.error as Error).message).toBe('boom');
      expect(retrying.retryDelayMs).toBe(10);
      expect(seen.find((e) => e.job.id === bad && e.name === 'dead')?.job.attempt).toBe(2);
      for (const e of seen) expect(e.durationMs).toBeGreaterThanOrEqual(0);
    } finally {
      stopSeeing();
      stopThrowing();
    }
  });

  it('cancelled is emitted for a running job that is cancelled; filters by queue and name hold', async () => {
    const events = t.app.get(JobEvents);
    const cancelled: JobEvent[] = [];
    const other: JobEvent[] = [];
    const stop = [
      events.listen((e) => cancelled.push(e), { queue: 'ev-hang', names: ['cancelled'] }),
      events.listen((e) => other.push(e), { queue: 'ev-ok' }),
    ];
    try {
      const queue = t.app.get(QueueService);
      const id = await queue.enqueue('ev-hang', {});
      await waitFor('running', async () => release.has(id));
      await queue.cancel(id);
      await waitFor('cancelled event', async () => cancelled.length === 1);
      expect(cancelled[0]).toMatchObject({ name: 'cancelled', job: { id } });
      expect((await row(id)).status).toBe('cancelled');
      expect(other).toEqual([]);
    } finally {
      for (const s of stop) s();
    }
  });
});
