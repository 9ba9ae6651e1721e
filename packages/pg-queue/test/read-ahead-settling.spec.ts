import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { WorkerPool } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

let db: pg.Pool;

@Injectable()
class Handlers {
  @JobHandler('settling', { concurrency: 1, prefetch: 5 })
  async settling(job: Job<{ ms: number }>) {
    await db.query('INSERT INTO runs (job_id, attempt) VALUES ($1, $2)', [job.id, job.attempt]);
    await new Promise((r) => setTimeout(r, job.payload.ms));
  }
}

// A job started from the buffer is charged, and given its full lease, by a quick heartbeat after its start or by
// its outcome. When the outcome cannot be written (the database busy: the writer backs off and retries) and the
// worker runs and holds nothing else, the quick beats must go on marking it: the worker once answered "nothing to
// mark" as soon as nothing ran and nothing was buffered, and left a job that ended unmarked to the full heartbeat
// (10 s), past its 5 s buffer lease. The sweeper then put it back uncharged and it ran a second time.
describe('read-ahead: a job that ended while its outcome cannot be written', () => {
  let app: INestApplicationContext;

  beforeAll(async () => {
    const url = await createTestDatabase('ra_settling');
    db = sqlPool(url);
    await db.query(`
      CREATE TABLE runs (job_id bigint NOT NULL, attempt int NOT NULL);
      CREATE TABLE busy (on_ boolean NOT NULL);
      INSERT INTO busy VALUES (false);
      -- While busy: completions fail as a database out of connections does (SQLSTATE 53300): the outcome
      -- writer keeps them and retries with backoff. Heartbeats (no status change) go through.
      CREATE FUNCTION refuse_completions() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.status = 'completed' AND OLD.status = 'processing' AND (SELECT on_ FROM busy) THEN
          RAISE EXCEPTION 'busy (test)' USING ERRCODE = '53300';
        END IF;
        RETURN NEW;
      END $$;`);
    app = await startApp(url, { providers: [Handlers], queue: { maintenance: { sweepIntervalMs: 200 } } });
    await waitFor('LISTEN connection', async () => app.get(WorkerPool).listening);
    await db.query(`CREATE TRIGGER refuse_completions BEFORE UPDATE ON background_jobs FOR EACH ROW EXECUTE FUNCTION refuse_completions()`);
  });
  afterAll(async () => {
    await db.query('UPDATE busy SET on_ = false');
    await app?.close();
    await db?.end();
  });

  it('is marked started by the quick beats while the write retries, so its short lease never lapses: each job runs once', async () => {
    await db.query('UPDATE busy SET on_ = true');
    // One claim: the first job starts at once; the other two wait in the buffer and start from it, the third
    // 50 ms after the second (so the second's quick beat, 100 ms after its start, finds the third too young to mark).
    const ids = await app.get(QueueService).enqueueMany([{ ms: 0 }, { ms: 50 }, { ms: 0 }].map((payload) => ({ queue: 'settling', payload })));
    await waitFor('all three started', async () => (await db.query('SELECT count(*)::int AS n FROM runs')).rows[0].n === 3, 10_000);
    // Past the 5 s buffer lease, with the sweeper looking every 200 ms.
    await new Promise((r) => setTimeout(r, 6_500));
    const { rows: held } = await db.query(`SELECT id::text, status::text, buffered, attempts FROM background_jobs WHERE id = ANY($1) ORDER BY id`, [ids]);
    await db.query('UPDATE busy SET on_ = false');
    await waitFor('all completed', async () => (await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1) AND status = 'completed'`, [ids])).rows[0].n === 3, 30_000, 50);
    const { rows: runs } = await db.query(`SELECT job_id::text AS id, count(*)::int AS runs, max(attempt) AS attempt FROM runs GROUP BY job_id ORDER BY job_id`);
    const { rows: final } = await db.query(`SELECT id::text, status::text, attempts FROM background_jobs WHERE id = ANY($1) ORDER BY id`, [ids]);
    // While the writes failed: every job still this worker's, marked started (charged, not buffered).
    expect(held).toEqual(ids.map((id) => ({ id, status: 'processing', buffered: false, attempts: 1 })));
    expect(runs).toEqual(ids.map((id) => ({ id, runs: 1, attempt: 1 })));
    expect(final).toEqual(ids.map((id) => ({ id, status: 'completed', attempts: 1 })));
  }, 60_000);
});
