import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { defineQueue, InvalidPayloadError, JobHandler, PgQueueError, QueueService, type Job } from 'nestjs-pg-queue';
import { useTestApp, waitFor } from './support/test-app.js';

// Issue 43, "Jobs after enqueue": promote, changePriority, changeRunAt, changeDelay and updatePayload change a job
// that has not started, checked as an enqueue is, and answer why not otherwise; each asserted from the row.
const Mail = defineQueue<{ to: string }>('jc-mail', {
  validate: (p) => (typeof (p as { to?: unknown })?.to === 'string' && (p as { to: string }).to.includes('@') ? undefined : 'to must be an email address'),
});

let release: () => void = () => undefined;
const held = new Promise<void>((resolve) => (release = resolve));
const started = new Set<string>();

@Injectable()
class Handlers {
  // One slot and a read-ahead buffer: the first job runs until released, the next ones wait in the buffer.
  @JobHandler('jc-busy', { concurrency: 1, prefetch: 5, eagerStart: false })
  async busy(job: Job<{ n: number }>) {
    started.add(job.id);
    await held;
  }

  @JobHandler(Mail)
  async mail() {}
}

describe('changing a job after enqueue (issue 43)', () => {
  const t = useTestApp('job_changes', { providers: [Handlers], queue: { maintenance: { enabled: false } } });
  const row = async (id: string) =>
    (
      await t.db.query<{ status: string; priority: number; payload: unknown; run_at: Date; due_in_ms: number; buffered: boolean }>(
        `SELECT status::text, priority, payload, run_at, buffered, (extract(epoch FROM run_at - now()) * 1000)::float8 AS due_in_ms FROM background_jobs WHERE id = $1`,
        [id],
      )
    ).rows[0];
  const service = () => t.app.get(QueueService);
  const later = (payload: unknown = { n: 0 }) => service().enqueue('jc-idle', payload, { delayMs: 3_600_000, priority: 1 });

  it('promote makes a delayed job due now; a job already due keeps its run_at', async () => {
    const id = await later();
    expect(await service().promote(id)).toBe('changed');
    expect((await row(id)).due_in_ms).toBeLessThanOrEqual(0);
    const dueAt = (await row(id)).run_at;
    expect(await service().promote(id)).toBe('changed');
    expect((await row(id)).run_at).toEqual(dueAt);
  });

  it('changePriority, changeRunAt and changeDelay set the row (run_at by the database clock)', async () => {
    const id = await later();
    expect(await service().changePriority(id, -7)).toBe('changed');
    expect((await row(id)).priority).toBe(-7);
    const at = new Date('2031-05-01T10:00:00.000Z');
    expect(await service().changeRunAt(id, at)).toBe('changed');
    expect((await row(id)).run_at).toEqual(at);
    expect(await service().changeDelay(id, 120_000)).toBe('changed');
    const { due_in_ms } = await row(id);
    expect(due_in_ms).toBeGreaterThan(110_000);
    expect(due_in_ms).toBeLessThanOrEqual(120_000);
    // Nothing but what was asked changed.
    expect((await row(id)).payload).toEqual({ n: 0 });
  });

  it('updatePayload replaces the payload, checked as at enqueue; a refused one changes nothing', async () => {
    const id = await later({ n: 1 });
    expect(await service().updatePayload(id, { n: 2, tags: ['a'] })).toBe('changed');
    expect((await row(id)).payload).toEqual({ n: 2, tags: ['a'] });
    await expect(service().updatePayload(id, { n: 10n })).rejects.toThrow(PgQueueError);
    await expect(service().updatePayload(id, undefined)).rejects.toThrow(/payload is undefined/);
    expect((await row(id)).payload).toEqual({ n: 2, tags: ['a'] });
  });

  it("updatePayload runs the validator of the job's typed queue", async () => {
    await service().pause(Mail.name);
    try {
      const id = await service().enqueue(Mail, { to: 'ada@example.com' });
      const error = await service().updatePayload(id, { to: 'nobody' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidPayloadError);
      expect(String((error as Error).message)).toContain('to must be an email address');
      expect((await row(id)).payload).toEqual({ to: 'ada@example.com' });
      expect(await service().updatePayload(id, { to: 'grace@example.com' })).toBe('changed');
      expect((await row(id)).payload).toEqual({ to: 'grace@example.com' });
    } finally {
      await service().resume(Mail.name);
    }
  });

  it('bad arguments fail with an error naming them, before any statement', async () => {
    const id = await later();
    await expect(service().changePriority(id, 1.5)).rejects.toThrow(/priority/);
    await expect(service().changePriority(id, undefined as unknown as number)).rejects.toThrow(/priority/);
    await expect(service().changeRunAt(id, new Date('nope'))).rejects.toThrow(/runAt/);
    await expect(service().changeDelay(id, -1)).rejects.toThrow(/delayMs/);
    await expect(service().promote('x1')).rejects.toThrow(PgQueueError);
    expect((await row(id)).priority).toBe(1);
  });

  it('a running job answers running, a job read ahead answers held, a finished one its status, a missing one not-found', async () => {
    const first = await service().enqueue('jc-busy', { n: 1 });
    await waitFor('the first job running', async () => started.has(first));
    const second = await service().enqueue('jc-busy', { n: 2 });
    await waitFor('the second job read ahead', async () => (await row(second)).buffered);
    expect(await service().updatePayload(first, { n: 9 })).toBe('running');
    expect(await service().changePriority(second, 5)).toBe('held');
    expect(await row(first)).toMatchObject({ payload: { n: 1 }, priority: 0 });
    expect(await row(second)).toMatchObject({ payload: { n: 2 }, priority: 0 });
    release();
    await waitFor('both completed', async () => (await row(first)).status === 'completed' && (await row(second)).status === 'completed');
    expect(await service().promote(first)).toBe('completed');
    expect(await service().promote('987654321')).toBe('not-found');
    const cancelled = await later();
    await service().cancel(cancelled);
    expect(await service().changeDelay(cancelled, 0)).toBe('cancelled');
  });
});
