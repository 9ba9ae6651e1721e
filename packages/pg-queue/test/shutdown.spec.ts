import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, WorkerPool, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, statusCounts, waitFor } from './support/test-app.js';

const aborted: string[] = [];
let unstick: () => void = () => undefined;
const stuckUntilTestEnds = new Promise<void>((resolve) => (unstick = resolve));

@Injectable()
class Slow {
  @JobHandler('slow', { concurrency: 4 })
  async slow() {
    await new Promise((r) => setTimeout(r, 400));
  }

  // Ignores its signal on purpose: shutdown must not wait for it past the grace period.
  @JobHandler('stuck', { concurrency: 2 })
  async stuck(job: Job) {
    job.signal.addEventListener('abort', () => aborted.push(job.id));
    await stuckUntilTestEnds;
  }
}

describe('graceful shutdown', () => {
  it('stops claiming and lets running jobs finish', async () => {
    const url = await createTestDatabase('drain');
    const db = sqlPool(url);
    const app = await startApp(url, { providers: [Slow], queue: { shutdownGraceMs: 5_000 } });
    const queue = app.get(QueueService);
    await queue.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ queue: 'slow', payload: { i } })));
    await waitFor('4 running', async () => app.get(WorkerPool).activeCounts().slow === 4);
    await app.close();
    // The 4 that ran finished and were recorded; the 2 never claimed wait in the queue, untouched.
    expect(await statusCounts(db, 'slow')).toEqual({ completed: 4, queued: 2 });
    const { rows } = await db.query(`SELECT attempts FROM background_jobs WHERE status = 'queued'`);
    expect(rows).toEqual([{ attempts: 0 }, { attempts: 0 }]);
    await db.end();
  });

  it('aborts what outlives the grace period and puts it back without counting the attempt', async () => {
    const url = await createTestDatabase('abandon');
    const db = sqlPool(url);
    const app = await startApp(url, { providers: [Slow], queue: { shutdownGraceMs: 300 } });
    const queue = app.get(QueueService);
    const ids = await queue.enqueueMany([{ queue: 'stuck', payload: 1 }, { queue: 'stuck', payload: 2 }]);
    await waitFor('2 running', async () => app.get(WorkerPool).activeCounts().stuck === 2);
    const t0 = Date.now();
    await app.close();
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(aborted.sort()).toEqual([...ids].sort());
    const { rows } = await db.query(`SELECT status::text, attempts, lease_expires_at FROM background_jobs ORDER BY id`);
    expect(rows).toEqual([
      { status: 'queued', attempts: 0, lease_expires_at: null },
      { status: 'queued', attempts: 0, lease_expires_at: null },
    ]);
    unstick();
    await db.end();
  });
});
