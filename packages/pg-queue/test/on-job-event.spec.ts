import { Injectable, Logger } from '@nestjs/common';
import { afterAll, describe, expect, it, jest } from '@jest/globals';
import { JobHandler, OnJobEvent, QueueService, type Job, type JobEvent } from 'nestjs-pg-queue';
import { useTestApp, waitFor } from './support/test-app.js';

const seen: { listener: string; name: string; id: string; result?: unknown; error?: string; durationMs: number }[] = [];

@Injectable()
class Handlers {
  @JobHandler('oe-ok')
  async ok(job: Job<{ n: number }>) {
    return { squared: job.payload.n ** 2 };
  }

  @JobHandler('oe-fail', { maxAttempts: 2, backoff: { baseMs: 10, maxMs: 10 } })
  async fail() {
    throw new Error('no luck');
  }
}

@Injectable()
class Audit {
  @OnJobEvent('oe-ok', 'completed')
  completed(event: JobEvent) {
    seen.push({ listener: 'completed', name: event.name, id: event.job.id, result: event.result, durationMs: event.durationMs });
  }

  @OnJobEvent('oe-fail', ['retrying', 'dead'])
  @OnJobEvent('oe-ok', 'active')
  several(event: JobEvent) {
    seen.push({ listener: 'several', name: event.name, id: event.job.id, error: (event.error as Error | undefined)?.message, durationMs: event.durationMs });
  }

  @OnJobEvent('oe-ok', ['active', 'completed'])
  throws() {
    throw new Error('listener bug');
  }

  @OnJobEvent('oe-ok', 'completed')
  async rejects() {
    throw new Error('async listener bug');
  }

  @OnJobEvent('oe-nobody', 'completed')
  orphan() {}
}

describe('@OnJobEvent: provider methods on the JobEvents bus, found through discovery', () => {
  const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  const error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
  const t = useTestApp('onjobevent', { providers: [Handlers, Audit], queue: { maintenance: { enabled: false } } });
  const status = async (id: string) => (await t.db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0]?.status;
  afterAll(() => {
    warn.mockRestore();
    error.mockRestore();
  });

  it('warns at boot about a listener on a queue no handler of this app runs', () => {
    expect(warn.mock.calls.map(([message]) => message)).toContain(
      `@OnJobEvent Audit.orphan listens to queue "oe-nobody", but no @JobHandler of this app handles it: events come from this instance's workers only, so it will never be called here.`,
    );
  });

  it('calls each method with its queue’s events; throwing and rejecting listeners are logged and break neither the jobs nor the worker', async () => {
    const queue = t.app.get(QueueService);
    const ids = await queue.enqueueMany([1, 2, 3].map((n) => ({ queue: 'oe-ok', payload: { n } })));
    const bad = await queue.enqueue('oe-fail', {});
    await waitFor('all settled', async () => (await Promise.all(ids.map(status))).every((s) => s === 'completed') && (await status(bad)) === 'failed');
    await waitFor('events seen', async () => seen.filter((e) => e.listener === 'completed').length === 3 && seen.some((e) => e.name === 'dead'));
    for (const [i, id] of ids.entries()) {
      expect(seen.filter((e) => e.id === id).map((e) => `${e.listener}:${e.name}`)).toEqual(['several:active', 'completed:completed']);
      expect(seen.find((e) => e.id === id && e.name === 'completed')?.result).toEqual({ squared: (i + 1) ** 2 });
    }
    expect(seen.filter((e) => e.id === bad).map((e) => `${e.name}:${e.error}`)).toEqual(['retrying:no luck', 'dead:no luck']);
    for (const e of seen) expect(e.durationMs).toBeGreaterThanOrEqual(0);
    // The bus logged every listener failure (6 sync throws, 3 rejections), naming the job.
    await waitFor('rejections logged', async () => error.mock.calls.filter(([m]) => String(m).includes('async listener bug')).length === 3);
    expect(error.mock.calls.filter(([m]) => String(m).includes(`listener of queue "oe-ok" threw on job ${ids[0]}: Error: listener bug`)).length).toBe(2);
    // The worker goes on: a job enqueued after all that still completes.
    const after = await queue.enqueue('oe-ok', { n: 4 });
    await waitFor('later job completed', async () => (await status(after)) === 'completed');
  });
});
