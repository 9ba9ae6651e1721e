import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { Interval, ScheduleModule } from '@nestjs/schedule';
import { JobStore, PgQueueModule, QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

let ticks = 0;

@Injectable()
class Ticker {
  @Interval(100)
  tick() {
    ticks++;
  }
}

/** A job claimed by a worker that vanished: its lease expires in 1 s and only the sweeper puts it back. */
async function orphanJob(app: Awaited<ReturnType<typeof startApp>>): Promise<string> {
  const id = await app.get(QueueService).enqueue('nobody-handles-this', {});
  const claim = await app.get(JobStore).claimJobs('nobody-handles-this', 1, 'vanished-worker', 1_000);
  expect(claim.jobs.map((j) => j.id)).toEqual([id]);
  return id;
}

describe('maintenance on @nestjs/schedule', () => {
  it('leaves the app’s own @Interval running once when the app imports ScheduleModule.forRoot(), and still sweeps', async () => {
    const url = await createTestDatabase('schedapp');
    const db = sqlPool(url);
    const app = await startApp(url, {
      providers: [Ticker],
      imports: [ScheduleModule.forRoot(), PgQueueModule.forRoot({ connection: url, workers: false, maintenance: { sweepIntervalMs: 100 } })],
    });
    const id = await orphanJob(app);
    ticks = 0;
    await new Promise((r) => setTimeout(r, 1_000));
    const perSecond = ticks;
    // Ten a second; twenty when a second ScheduleModule explorer mounts every @Interval again.
    expect(perSecond).toBeGreaterThanOrEqual(5); // loose below: a loaded CI machine delays timers
    expect(perSecond).toBeLessThanOrEqual(12);
    await waitFor('the sweeper requeued the orphan', async () => {
      const { rows } = await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id]);
      return rows[0].status === 'queued';
    });
    await app.close();
    await db.end();
  });

  it('sweeps in an app without ScheduleModule', async () => {
    const url = await createTestDatabase('schednone');
    const db = sqlPool(url);
    const app = await startApp(url, { queue: { workers: false, maintenance: { sweepIntervalMs: 100 } } });
    const id = await orphanJob(app);
    await waitFor('the sweeper requeued the orphan', async () => {
      const { rows } = await db.query(`SELECT status, last_error FROM background_jobs WHERE id = $1`, [id]);
      return rows[0].status === 'queued' && /lease expired: worker vanished-worker/.test(rows[0].last_error);
    });
    await app.close();
    await db.end();
  });
});
