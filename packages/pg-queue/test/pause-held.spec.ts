import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { useTestApp, waitFor } from './support/test-app.js';

// pause() in the worker's own process: once it returns, no job this process held starts, whichever way it held it:
// buffered, in a start mark on its way, or started ahead of a free slot (armed, issue 39: its row says started, so the
// heartbeat's check keeps it). A CI run under heavy load started one armed job after pause() returned. Jobs of about a
// millisecond at concurrency 1 make the worker hold one or two armed most of the time; twenty pauses at random moments.
let calls = 0;

@Injectable()
class Handlers {
  @JobHandler('ph', { concurrency: 1, prefetch: 20, eagerStart: false })
  async run(job: Job<{ ms: number }>) {
    calls += 1;
    await new Promise((resolve) => setTimeout(resolve, job.payload.ms));
  }
}

describe('pause() in the worker’s own process stops every job it holds', () => {
  const t = useTestApp('pause_held', { providers: [Handlers], queue: { maintenance: { enabled: false } } });

  it('no handler is called after pause() returns, over twenty pauses of a busy queue; after resume() every job runs once', async () => {
    const queue = t.app.get(QueueService);
    const total = 3_000;
    await queue.enqueueMany(Array.from({ length: total }, () => ({ queue: 'ph', payload: { ms: 1 } })));
    const after: number[] = [];
    let armedSeen = 0;
    for (let round = 0; round < 20; round++) {
      await waitFor('jobs running', async () => calls > round * 100 + 50, 30_000, 5);
      const { rows } = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'ph' AND status = 'processing' AND NOT buffered`);
      if (rows[0].n > 1) armedSeen += 1;
      await queue.pause('ph');
      const atReturn = calls;
      await new Promise((resolve) => setTimeout(resolve, 150));
      after.push(calls - atReturn);
      await queue.resume('ph');
    }
    console.log(`pauses with more than one started row (a job armed): ${armedSeen} of 20; calls after pause() returned: ${JSON.stringify(after)}`);
    expect(after.filter((n) => n > 0)).toEqual([]);
    await waitFor('every job completed', async () => {
      const { rows } = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'ph' AND status = 'completed'`);
      return rows[0].n === total;
    }, 60_000, 50);
    expect(calls).toBe(total);
  }, 120_000);
});
