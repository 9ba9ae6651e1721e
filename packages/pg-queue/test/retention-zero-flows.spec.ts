import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { useTestApp, waitFor } from './support/test-app.js';

// completedRetentionMs: 0 deletes a plain job at its completion, but keeps a flow's job (README: "Retention"): its
// dependents read its result, and the flow's jobs are pruned together once the flow has finished. What such a kept
// row must still hold, as at any retention: the handler's result, its last progress, and the lines it logged.

@Injectable()
class Handlers {
  @JobHandler('rz-parent')
  async parent(job: Job<{ n: number }>) {
    await job.progress({ done: 1, of: 1 });
    job.log(`parent ${job.payload.n} ran`);
    return { doubled: job.payload.n * 2 };
  }

  @JobHandler('rz-child')
  async child(job: Job<{ n: number }>) {
    const [parent] = await job.parents();
    return { parentResult: parent?.result ?? null };
  }

  @JobHandler('rz-plain')
  async plain(job: Job<{ n: number }>) {
    job.log('plain ran');
    return job.payload.n;
  }
}

describe('completedRetentionMs: 0 and flows', () => {
  const t = useTestApp('retention-zero-flows', { providers: [Handlers], queue: { maintenance: { enabled: false, completedRetentionMs: 0 } } });

  it("a flow job's kept row holds its result, progress and log lines; its child reads the result", async () => {
    const queue = t.app.get(QueueService);
    const flow = await queue.enqueueFlow({
      jobs: [
        { ref: 'p', queue: 'rz-parent', payload: { n: 21 } },
        { ref: 'c', queue: 'rz-child', payload: { n: 0 }, dependsOn: ['p'] },
      ],
    });
    await waitFor('the flow finished', async () => (await queue.getFlow(flow.id))?.status === 'completed', 20_000);
    const { rows } = await t.db.query<{ id: string; status: string; result: unknown; progress: unknown; lines: string[] }>(
      `SELECT id::text, status, result, progress, coalesce((SELECT array_agg(l ->> 'line') FROM jsonb_array_elements(logs -> 'lines') AS l), '{}') AS lines
         FROM background_jobs WHERE flow_id = $1 ORDER BY id`,
      [flow.id],
    );
    expect(rows.map((r) => [r.status, r.result])).toEqual([
      ['completed', { doubled: 42 }],
      ['completed', { parentResult: { doubled: 42 } }],
    ]);
    expect(rows[0].progress).toEqual({ done: 1, of: 1 });
    expect(rows[0].lines).toEqual(['parent 21 ran']);
  });

  it('a plain job goes with its lines at completion', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('rz-plain', { n: 7 });
    await waitFor('completed and deleted', async () => (await t.db.query(`SELECT 1 FROM background_jobs WHERE id = $1`, [id])).rowCount === 0);
  });
});
