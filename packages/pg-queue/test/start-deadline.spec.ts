import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { WorkerPool } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { SQL } from '../src/store/job.sql.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// A job may start only while its lease leaves its row time to learn it started: half the lease after its claim
// was sent (the buffer's short lease for a job read ahead). The worker starts the jobs of one claim, or of one
// refill from its buffer, one after another, and each start runs the handler's synchronous part. The deadline
// was once compared with one clock reading taken before the first start: a handler that blocked the event loop
// (or the process stopped by SIGSTOP in the middle of the starts, as the fault suite found) let the next jobs
// start seconds past their deadlines, with leases lapsed or about to. These tests block the event loop in the
// first handler and read from the tables what became of the jobs started after it.

const LEASE_MS = 4_000;
/** Longer than half the lease: the jobs after the blocking one are past their start deadline when their turn comes. */
const BLOCK_MS = 2_500;

let db: pg.Pool;

interface Payload {
  /** Block the event loop this long, synchronously, as the handler starts. */
  blockMs?: number;
  /** Run until cancelled. */
  untilCancelled?: boolean;
}

/** Records the start (with how long after the row's claim it began, by the database clock), after any block. */
async function handle(job: Job<Payload>): Promise<void> {
  if (job.payload.blockMs) {
    const until = performance.now() + job.payload.blockMs;
    while (performance.now() < until) {
      // the handler's synchronous part, as a CPU-bound or blocking call would hold it
    }
  }
  await db.query(
    `INSERT INTO starts (job_id, attempt, after_claim_ms)
     SELECT $1, $2, extract(epoch FROM clock_timestamp() - locked_at) * 1000 FROM background_jobs WHERE id = $1`,
    [job.id, job.attempt],
  );
  if (job.payload.untilCancelled) await new Promise((resolve) => job.signal.addEventListener('abort', resolve));
}

@Injectable()
class Handlers {
  @JobHandler('claimed', { concurrency: 3, prefetch: 0, eagerStart: false })
  claimed(job: Job<Payload>) {
    return handle(job);
  }

  @JobHandler('buffered', { concurrency: 2, prefetch: 3, eagerStart: false })
  buffered(job: Job<Payload>) {
    return handle(job);
  }
}

interface Row {
  id: string;
  status: string;
  attempts: number;
  fence_token: number;
}

async function rowsOf(ids: string[]): Promise<Row[]> {
  const { rows } = await db.query<Row>(`SELECT id::text, status::text, attempts, fence_token::int FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id`, [ids]);
  return rows;
}

async function startsOf(ids: string[]): Promise<{ id: string; runs: number; attempt: number; after_claim_ms: number }[]> {
  const { rows } = await db.query<{ id: string; runs: number; attempt: number; after_claim_ms: number }>(
    `SELECT job_id::text AS id, count(*)::int AS runs, max(attempt) AS attempt, max(after_claim_ms)::float8 AS after_claim_ms
     FROM starts WHERE job_id = ANY($1::int8[]) GROUP BY job_id ORDER BY job_id`,
    [ids],
  );
  return rows;
}

describe('no job starts past its start deadline, even after a handler blocked the starts before it', () => {
  let app: INestApplicationContext;
  let queue: QueueService;

  beforeAll(async () => {
    const url = await createTestDatabase('start_deadline');
    db = sqlPool(url);
    await db.query('CREATE TABLE starts (job_id bigint NOT NULL, attempt int NOT NULL, after_claim_ms float8)');
    app = await startApp(url, { providers: [Handlers], queue: { leaseMs: LEASE_MS } });
    await waitFor('LISTEN connection', async () => app.get(WorkerPool).listening);
    queue = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('the jobs of one claim after a handler that blocked past half the lease go back uncharged, are claimed again, and run once', async () => {
    // One insert, one claim of all three (concurrency 3), started in claim order: the first blocks.
    const ids = await queue.enqueueMany([{ blockMs: BLOCK_MS }, {}, {}].map((payload) => ({ queue: 'claimed', payload })));
    await waitFor('all three completed', async () => (await rowsOf(ids)).every((r) => r.status === 'completed'), 20_000, 50);
    const [blocker, ...after] = ids;
    const starts = await startsOf(ids);
    // Each ran once, at attempt 1; the two after the blocker started soon after a claim of their own (the second,
    // fence token 2), not 2.5 s into the claim that took them first.
    expect(starts.map(({ id, runs, attempt }) => ({ id, runs, attempt }))).toEqual(ids.map((id) => ({ id, runs: 1, attempt: 1 })));
    expect(starts.filter((s) => after.includes(s.id)).map((s) => s.after_claim_ms < LEASE_MS / 2)).toEqual([true, true]);
    expect(await rowsOf(ids)).toEqual([
      { id: blocker, status: 'completed', attempts: 1, fence_token: 1 },
      ...after.map((id) => ({ id, status: 'completed', attempts: 1, fence_token: 2 })),
    ]);
  }, 60_000);

  it('the jobs of one refill from the buffer after a handler that blocked past the start deadline go back uncharged, are claimed again, and run once', async () => {
    // One claim of five: two start (they run until cancelled), three wait in the buffer on the short lease.
    const ids = await queue.enqueueMany(
      [{ untilCancelled: true }, { untilCancelled: true }, { blockMs: BLOCK_MS }, {}, {}].map((payload) => ({ queue: 'buffered', payload })),
    );
    const [r1, r2, blocker, ...after] = ids;
    await waitFor('two running, three read ahead', async () => {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'processing'`, [ids]);
      return rows[0].n === 5 && (await startsOf([r1, r2])).length === 2;
    }, 10_000, 10);
    // Both running jobs cancelled in one transaction: their notices arrive together, both slots free, and after
    // the check a cancel asks for, one refill starts the buffer's jobs: the blocker first.
    const client = await db.connect();
    try {
      await client.query('BEGIN');
      for (const id of [r1, r2]) await client.query(SQL.cancelJob, [id]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    await waitFor('the buffer’s three completed', async () => (await rowsOf([blocker, ...after])).every((r) => r.status === 'completed'), 20_000, 50);
    const starts = await startsOf([blocker, ...after]);
    expect(starts.map(({ id, runs, attempt }) => ({ id, runs, attempt }))).toEqual([blocker, ...after].map((id) => ({ id, runs: 1, attempt: 1 })));
    expect(starts.filter((s) => after.includes(s.id)).map((s) => s.after_claim_ms < LEASE_MS / 2)).toEqual([true, true]);
    expect(await rowsOf(ids)).toEqual([
      { id: r1, status: 'cancelled', attempts: 1, fence_token: 1 },
      { id: r2, status: 'cancelled', attempts: 1, fence_token: 1 },
      { id: blocker, status: 'completed', attempts: 1, fence_token: 1 },
      ...after.map((id) => ({ id, status: 'completed', attempts: 1, fence_token: 2 })),
    ]);
  }, 60_000);
});
