import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { WorkerPool } from '../../src/internal.js';
import { JOBS_CHANNEL } from '../../src/pg-queue.constants.js';
import { MAX_STEPS_PER_JOB } from '../../src/steps/job-steps.js';
import { useTestApp, waitFor } from '../support/test-app.js';

// Durable steps at their edges (issue 40, "The tests that are missing today"): a step asked for after the attempt
// was aborted, and the step count limit on both sides. Every run of a step's function is a row of `effects`.
let effect: (job: Job, step: string) => Promise<unknown>;
/** The jobs whose step call (after the abort) has returned or thrown: what it did is in the tables by then. */
const stepCalled = new Map<string, string>();

@Injectable()
class Handlers {
  /** Waits for its abort (the timeout), then asks for a new step, as a handler that ignores its signal would. */
  @JobHandler('m-step-after-abort', { timeoutMs: 200, maxAttempts: 1 })
  async afterAbort(job: Job) {
    await new Promise((resolve) => (job.signal.aborted ? resolve(undefined) : job.signal.addEventListener('abort', resolve)));
    try {
      await job.step('after-abort', () => effect(job, 'after-abort').then(() => 'ran'));
      stepCalled.set(job.id, 'returned');
    } catch (error) {
      stepCalled.set(job.id, (error as Error).message);
    }
  }

  @JobHandler('m-step-many', { maxAttempts: 1 })
  async many(job: Job) {
    await job.step('one-more', () => effect(job, 'one-more').then(() => 'ran'));
  }
}

describe('durable steps: the abort check and the count limit', () => {
  const t = useTestApp('mutations_steps', { providers: [Handlers], queue: { maintenance: { enabled: false } } }, (db) =>
    db.query(`CREATE TABLE effects (job_id int8, step text)`),
  );
  const effects = async (id: string) => (await t.db.query(`SELECT step FROM effects WHERE job_id = $1`, [id])).rows;
  const row = async (id: string) => (await t.db.query(`SELECT status, last_error, jsonb_array_length(coalesce(steps, '[]')) AS steps FROM background_jobs WHERE id = $1`, [id])).rows[0];

  it('a step asked for after the attempt was aborted does not run its function', async () => {
    effect = (job, step) => t.db.query(`INSERT INTO effects (job_id, step) VALUES ($1, $2)`, [job.id, step]);
    await waitFor('LISTEN connection', async () => t.app.get(WorkerPool).listening);
    const id = await t.app.get(QueueService).enqueue('m-step-after-abort', {});
    await waitFor('the step call after the abort settled', async () => stepCalled.get(id), 10_000, 10);
    expect(await effects(id)).toEqual([]);
    expect(stepCalled.get(id)).toMatch(/timed out after 200 ms/);
    await waitFor('the job failed', async () => (await row(id))?.status === 'failed', 10_000);
    expect(await row(id)).toMatchObject({ status: 'failed', steps: 0 });
  });

  /** A job holding `recorded` steps already (as earlier attempts left them), then claimed: its handler asks for one more. */
  async function withSteps(recorded: number): Promise<string> {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('m-step-many', {}, { delayMs: 3_600_000 });
    await t.db.query(
      `UPDATE background_jobs SET run_at = now(),
         steps = (SELECT jsonb_agg(jsonb_build_object('name', 's' || g, 'result', g, 'attempt', 1, 'at', now())) FROM generate_series(1, $2::int) AS g)
       WHERE id = $1`,
      [id, recorded],
    );
    await t.db.query(`SELECT pg_notify($1, 'm-step-many')`, [JOBS_CHANNEL]); // wake the worker: its timer waits an hour
    await waitFor('the job finished', async () => ['completed', 'failed'].includes((await row(id))?.status), 20_000);
    return id;
  }

  it(`step number ${MAX_STEPS_PER_JOB} runs and is recorded`, async () => {
    const id = await withSteps(MAX_STEPS_PER_JOB - 1);
    expect(await row(id)).toMatchObject({ status: 'completed', steps: MAX_STEPS_PER_JOB });
    expect(await effects(id)).toEqual([{ step: 'one-more' }]);
  });

  it(`step number ${MAX_STEPS_PER_JOB + 1} is refused before its function runs`, async () => {
    const id = await withSteps(MAX_STEPS_PER_JOB);
    expect(await row(id)).toMatchObject({ status: 'failed', steps: MAX_STEPS_PER_JOB, last_error: expect.stringContaining(`over the limit of ${MAX_STEPS_PER_JOB}`) });
    expect(await effects(id)).toEqual([]);
  });
});
