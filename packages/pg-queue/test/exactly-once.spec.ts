import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { WorkerPool } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, statusCounts, waitFor } from './support/test-app.js';

const JOBS = 3_000;
const INSTANCES = 3;
let db: pg.Pool;

@Injectable()
class Recorder {
  // Each run writes a row through its own connection: the table, not a log, says who ran what and how often.
  @JobHandler('work', { concurrency: 8, batchSize: 8 })
  async work(job: Job<{ n: number }>) {
    await db.query('INSERT INTO runs (job_id, n, attempt) VALUES ($1, $2, $3)', [job.id, job.payload.n, job.attempt]);
  }
}

describe('several app instances over one queue', () => {
  let url: string;
  const apps: INestApplicationContext[] = [];

  beforeAll(async () => {
    url = await createTestDatabase('once');
    db = sqlPool(url);
    await db.query('CREATE TABLE runs (job_id bigint NOT NULL, n int NOT NULL, attempt int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())');
    for (let i = 0; i < INSTANCES; i++) {
      apps.push(await startApp(url, { providers: [Recorder], queue: { workerId: `instance-${i}`, connection: { url, poolSize: 4 } } }));
    }
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await db?.end();
  });

  it('processes each of a few thousand jobs exactly once', async () => {
    const queue = apps[0].get(QueueService);
    // Half in one transaction (one shared run_at), half one by one from every instance at once.
    await queue.enqueueMany(Array.from({ length: JOBS / 2 }, (_, n) => ({ queue: 'work', payload: { n } })));
    await Promise.all(
      apps.map(async (app, i) => {
        const q = app.get(QueueService);
        for (let n = JOBS / 2 + i; n < JOBS; n += INSTANCES) await q.enqueue('work', { n });
      }),
    );
    await waitFor('all jobs completed', async () => (await statusCounts(db, 'work')).completed === JOBS, 60_000, 100);

    const { rows } = await db.query<{ runs: number; distinct_jobs: number; distinct_n: number; max_per_job: number }>(`
      SELECT count(*)::int AS runs, count(DISTINCT job_id)::int AS distinct_jobs, count(DISTINCT n)::int AS distinct_n,
             (SELECT max(c)::int FROM (SELECT count(*) AS c FROM runs GROUP BY job_id) s) AS max_per_job
      FROM runs`);
    expect(rows[0]).toEqual({ runs: JOBS, distinct_jobs: JOBS, distinct_n: JOBS, max_per_job: 1 });
    expect(await statusCounts(db, 'work')).toEqual({ completed: JOBS });

    // Work spread over the instances (each claimed some), and every completed row names its owner.
    const owners = await db.query<{ locked_by: string; n: number }>(
      `SELECT locked_by, count(*)::int AS n FROM background_jobs GROUP BY locked_by ORDER BY locked_by`,
    );
    expect(owners.rows.map((r) => r.locked_by)).toEqual(['instance-0', 'instance-1', 'instance-2']);
    for (const app of apps) expect(app.get(WorkerPool).activeCounts()).toEqual({ work: 0 });
  });
});
