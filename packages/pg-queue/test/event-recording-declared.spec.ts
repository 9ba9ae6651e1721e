import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, JobSnoozedError, QueueService, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// Issue 43, the event stream's declarative opt-in: `@JobHandler(queue, { recordEvents: true })` turns recording on at
// each boot of a process that declares it (events/declared-event-queues.ts), as recordEvents(queue) does at runtime.
// A boot the database cannot answer in time still boots, and the recording is turned on in the background.

const snoozedOnce = new Set<string>();

@Injectable()
class Declared {
  @JobHandler('evd-declared', { recordEvents: true, maxAttempts: 3 })
  async declared(job: Job<{ snooze?: boolean }>) {
    // Snoozed on the first run only: queued again without charging the attempt, the `returned` event.
    if (job.payload.snooze && !snoozedOnce.has(job.id)) {
      snoozedOnce.add(job.id);
      throw new JobSnoozedError(10);
    }
  }

  @JobHandler('evd-plain')
  async plain() {}
}

@Injectable()
class LateDeclared {
  @JobHandler('evd-late', { recordEvents: true })
  async late() {}
}

@Injectable()
class BadOption {
  @JobHandler('evd-bad', { recordEvents: 'yes' as unknown as boolean })
  async bad() {}
}

describe('recordEvents declared on a handler (issue 43)', () => {
  let url: string;
  let db: pg.Pool;
  let app: INestApplicationContext;
  const typesOf = async (jobId: string) =>
    (await db.query<{ type: string }>(`SELECT type FROM background_job_events WHERE job_id = $1 ORDER BY tx, id`, [jobId])).rows.map((r) => r.type);
  const recording = async () =>
    (await db.query<{ queue_name: string }>(`SELECT queue_name FROM background_queues WHERE record_events ORDER BY queue_name`)).rows.map((r) => r.queue_name);

  beforeAll(async () => {
    url = await createTestDatabase('event_recording_declared');
    db = sqlPool(url);
    app = await startApp(url, { providers: [Declared], queue: { maintenance: { enabled: false } } });
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('the boot turns recording on for the declared queue only; its jobs record every change, `returned` included', async () => {
    expect(await recording()).toEqual(['evd-declared']);
    const queue = app.get(QueueService);
    const done = await queue.enqueue('evd-declared', {});
    const snoozed = await queue.enqueue('evd-declared', { snooze: true });
    const plain = await queue.enqueue('evd-plain', {});
    for (const id of [done, snoozed, plain]) {
      await waitFor(`job ${id} completed`, async () => (await db.query(`SELECT 1 FROM background_jobs WHERE id = $1 AND status = 'completed'`, [id])).rowCount === 1);
    }
    expect(await typesOf(done)).toEqual(['enqueued', 'started', 'completed']);
    expect(await typesOf(snoozed)).toEqual(['enqueued', 'started', 'returned', 'started', 'completed']);
    expect(await typesOf(plain)).toEqual([]);
    expect((await db.query<{ attempts: number }>(`SELECT attempts FROM background_jobs WHERE id = $1`, [snoozed])).rows[0].attempts).toBe(1);
  });

  it('a boot that cannot take the table in time boots anyway, and turns recording on once it can', async () => {
    // A transaction holding background_jobs in SHARE mode: the triggers' rebuild (SHARE ROW EXCLUSIVE) waits for it,
    // and gives up after its 5 s lock_timeout.
    const holder = await db.connect();
    let late: INestApplicationContext | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE background_jobs IN SHARE MODE');
      late = await startApp(url, { providers: [LateDeclared], queue: { migrationsRun: false, workers: false, maintenance: { enabled: false } }, logLevels: [] });
      expect(await recording()).toEqual(['evd-declared']);
      await holder.query('COMMIT');
      await waitFor('recording turned on in the background', async () => (await recording()).includes('evd-late'), 20_000);
      const triggers = await db.query<{ def: string }>(
        `SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgrelid = 'background_jobs'::regclass AND tgname = 'background_jobs_events_insert'`,
      );
      expect(triggers.rows[0].def).toContain('evd-late');
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
      await late?.close();
    }
  });

  it('a value that is not a boolean fails the boot, naming the option', async () => {
    await expect(startApp(url, { providers: [BadOption], queue: { migrationsRun: false, workers: false, maintenance: { enabled: false } }, logLevels: [] })).rejects.toThrow(/recordEvents/);
  });
});
