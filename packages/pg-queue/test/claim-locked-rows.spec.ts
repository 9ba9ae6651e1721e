import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// A queued job's row can be locked by someone else for as long as a transaction lasts: a 'replace' enqueue in
// the caller's open transaction, a dashboard action, an operator's SELECT ... FOR UPDATE. Every claim (plain,
// limited, keyed) must pass over it (SKIP LOCKED) and take the jobs behind it, not wait for that transaction.
// Nothing failed when SKIP LOCKED was dropped from a claim (issue 18, item 17).

const ran: string[] = [];

@Injectable()
class Handlers {
  @JobHandler('skip-plain')
  async plain(job: Job) {
    ran.push(job.id);
  }

  @JobHandler('skip-limited', { globalConcurrency: 2 })
  async limited(job: Job) {
    ran.push(job.id);
  }

  @JobHandler('skip-keyed', { concurrencyPerKey: 1 })
  async keyed(job: Job) {
    ran.push(job.id);
  }
}

describe('a claim passes over a queued row another transaction has locked', () => {
  let url: string;
  let db: pg.Pool;
  let locker: pg.PoolClient;
  let app: INestApplicationContext | undefined;
  const jobs: Record<string, { locked: string; behind: string }> = {};

  beforeAll(async () => {
    url = await createTestDatabase('claim-locked');
    db = sqlPool(url);
    // Enqueued before any worker runs: in each queue the locked job is the first in claim order.
    const producer = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    try {
      const queue = producer.get(QueueService);
      for (const name of ['skip-plain', 'skip-limited', 'skip-keyed']) {
        const options = name === 'skip-keyed' ? { concurrencyKey: 'tenant-a' } : {};
        const locked = await queue.enqueue(name, {}, options);
        // Another key for the keyed queue (one running job per key): the job behind is free to start.
        const behind = await queue.enqueue(name, {}, name === 'skip-keyed' ? { concurrencyKey: 'tenant-b' } : {});
        jobs[name] = { locked, behind };
      }
    } finally {
      await producer.close();
    }
    locker = await db.connect();
    await locker.query('BEGIN');
    await locker.query(`SELECT id FROM background_jobs WHERE id = ANY($1::int8[]) FOR UPDATE`, [Object.values(jobs).map((j) => j.locked)]);
  });

  afterAll(async () => {
    await locker?.query('ROLLBACK').catch(() => undefined);
    locker?.release();
    await app?.close();
    await db?.end();
  });

  it('plain, limited (globalConcurrency) and keyed (concurrencyPerKey) claims run the jobs behind it while the lock is held; the locked job runs once it is released', async () => {
    app = await startApp(url, { providers: [Handlers], queue: { maintenance: { enabled: false }, pollIntervalMs: 200 } });
    const status = async (ids: string[]) =>
      Object.fromEntries((await db.query<{ id: string; status: string }>(`SELECT id::text, status::text FROM background_jobs WHERE id = ANY($1::int8[])`, [ids])).rows.map((r) => [r.id, r.status]));
    const behind = Object.values(jobs).map((j) => j.behind);
    await waitFor('the jobs behind the locked rows completed', async () => Object.values(await status(behind)).every((s) => s === 'completed'), 10_000).catch(async (error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify(await status(behind))} (a claim waited for the lock?)`);
    });
    const locked = Object.values(jobs).map((j) => j.locked);
    expect(await status(locked)).toEqual(Object.fromEntries(locked.map((id) => [id, 'queued'])));
    expect(ran.filter((id) => locked.includes(id))).toEqual([]);

    await locker.query('ROLLBACK');
    await waitFor('the locked jobs, released, completed', async () => Object.values(await status(locked)).every((s) => s === 'completed'), 10_000);
  });
});

// Found by the test above: in a queue with concurrencyPerKey, a job without a key (enqueued by an instance that
// did not know the queue's options) is taken as a candidate without a lock, and the claim's UPDATE then waits
// for whoever holds its row, holding the queue's advisory lock: every claimer of the queue stalls until that
// transaction ends. Fixed: claimKeyedJobs locks its keyless candidates with SKIP LOCKED.
describe('a keyed claim passes over a locked job without a key', () => {
  it('the keyed job behind it runs while the lock is held', async () => {
    const url = await createTestDatabase('claim-locked-keyless');
    const db = sqlPool(url);
    const producer = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    const queue = producer.get(QueueService);
    const locked = await queue.enqueue('skip-keyed', {});
    const behind = await queue.enqueue('skip-keyed', {}, { concurrencyKey: 'tenant-b' });
    await producer.close();
    const locker = await db.connect();
    let app: INestApplicationContext | undefined;
    try {
      await locker.query('BEGIN');
      await locker.query(`SELECT id FROM background_jobs WHERE id = $1 FOR UPDATE`, [locked]);
      app = await startApp(url, { providers: [Handlers], queue: { maintenance: { enabled: false }, pollIntervalMs: 200 } });
      await waitFor('the keyed job behind the locked one completed', async () => (await app!.get(QueueService).get(behind))?.status === 'completed', 5_000);
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
      await app?.close();
      await db.end();
    }
  });
});
