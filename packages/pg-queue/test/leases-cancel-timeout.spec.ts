import { Injectable } from '@nestjs/common';
import { afterAll, describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { WorkerPool } from '../src/internal.js';
import { useTestApp, waitFor } from './support/test-app.js';

const signals = new Map<string, string>();
let release: () => void = () => undefined;
const released = new Promise<void>((resolve) => (release = resolve));

async function record(job: Job, event: string) {
  await t.db.query('INSERT INTO events (job_id, attempt, event) VALUES ($1, $2, $3)', [job.id, job.attempt, event]);
}

@Injectable()
class Handlers {
  // Runs 2.5 leases long: only heartbeats keep the sweeper (every 100 ms) from taking it.
  @JobHandler('long')
  async long(job: Job) {
    await record(job, 'start');
    await new Promise((r) => setTimeout(r, 2_500));
    await record(job, 'end');
  }

  @JobHandler('cancellable')
  async cancellable(job: Job) {
    await record(job, 'start');
    job.signal.addEventListener('abort', () => signals.set(job.id, String((job.signal.reason as Error)?.message)));
    await released; // ignores the signal: its late success must not count
  }

  @JobHandler('slowpoke', { timeoutMs: 200, maxAttempts: 2, backoff: () => 10 })
  async slowpoke(job: Job) {
    await record(job, 'start');
    job.signal.addEventListener('abort', () => signals.set(`${job.id}/${job.attempt}`, (job.signal.reason as Error).name));
    await released;
  }
}

const t = useTestApp('leases', { providers: [Handlers], queue: { leaseMs: 1_000, heartbeatMs: 250, maintenance: { sweepIntervalMs: 100 } } }, (db) =>
  db.query('CREATE TABLE events (job_id bigint, attempt int, event text, at timestamptz DEFAULT clock_timestamp())'),
);

describe('leases, cancellation and timeouts', () => {
  // The hung handlers wait for this; let them go once the file is done.
  afterAll(() => release());

  it('keeps a job running past its lease alive through heartbeats: it runs once', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('long', {});
    await waitFor('completed', async () => (await queue.get(id))?.status === 'completed', 10_000);
    const { rows } = await t.db.query('SELECT attempt, event FROM events WHERE job_id = $1 ORDER BY at', [id]);
    expect(rows).toEqual([{ attempt: 1, event: 'start' }, { attempt: 1, event: 'end' }]);
    expect(await queue.get(id)).toMatchObject({ attempts: 1, lastError: null });
  });

  it('cancels a queued job before it runs', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('cancellable', {}, { delayMs: 60_000 });
    expect(await queue.cancel(id)).toBe('cancelled');
    expect(await queue.get(id)).toMatchObject({ status: 'cancelled', attempts: 0 });
    expect(await queue.cancel(id)).toBe('cancelled'); // already: reports the status it is in
    expect(await queue.cancel('999999')).toBe('not-found');
  });

  it('cancels a running job: its signal aborts and its late outcome is discarded', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('cancellable', {});
    await waitFor('running', async () => (await t.db.query('SELECT 1 FROM events WHERE job_id = $1', [id])).rowCount === 1);
    expect(await queue.cancel(id)).toBe('cancelled');
    await waitFor('signal aborted through NOTIFY', async () => signals.has(id));
    expect(signals.get(id)).toBe('job was cancelled');
    await waitFor('slot freed', async () => t.app.get(WorkerPool).activeCounts().cancellable === 0);
    expect(await queue.get(id)).toMatchObject({ status: 'cancelled', attempts: 1 });
    // Cancelled jobs can be retried.
    expect(await queue.retry(id)).toBe(true);
    expect((await queue.get(id))!.status).not.toBe('cancelled');
  });

  it('times out a handler that ignores its signal, retries it, then dead-letters it', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('slowpoke', {});
    await waitFor('dead letter', async () => (await queue.get(id))?.status === 'failed', 10_000);
    const job = await queue.get(id);
    expect(job).toMatchObject({ attempts: 2, status: 'failed' });
    expect(job!.lastError).toMatch(/^JobTimeoutError: job timed out after 200 ms/);
    expect(signals.get(`${id}/1`)).toBe('JobTimeoutError');
    expect(signals.get(`${id}/2`)).toBe('JobTimeoutError');
    // Both hung handlers still "run", but their slots were given back.
    expect(t.app.get(WorkerPool).activeCounts().slowpoke).toBe(0);
  });
});
