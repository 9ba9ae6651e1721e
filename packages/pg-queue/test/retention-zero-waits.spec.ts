import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, PgQueueError, QueueService, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// completedRetentionMs: 0 deletes a job at its completion (README: "Retention"), but not a job someone waits on: waitFor
// marks the row (awaited) and the completion keeps a marked row, completed with its result, for the pruner. Deleted
// with the rest, such a job answered its waiter null in place of its result, and a waiter that missed the notice (its
// LISTEN down) "the job's row is gone" (the simulation's seed 52). A waitFor that comes after the deletion has no row
// to read: its error names the retention.

const release = new Map<string, () => void>();

@Injectable()
class Handlers {
  @JobHandler('rzw-held')
  async held(job: Job<{ n: number }>) {
    await new Promise<void>((resolve) => {
      release.set(job.id, resolve);
      job.signal.addEventListener('abort', () => resolve());
    });
    return { doubled: job.payload.n * 2 };
  }
}

const rowOf = async (db: pg.Pool, id: string) =>
  (await db.query<{ status: string; result: unknown; awaited: boolean | null }>(`SELECT status, result, awaited FROM background_jobs WHERE id = $1`, [id])).rows[0];

describe('completedRetentionMs: 0 and waitFor', () => {
  let db: pg.Pool;
  let worker: INestApplicationContext;
  let deaf: INestApplicationContext;

  beforeAll(async () => {
    const url = await createTestDatabase('retention-zero-waits');
    db = sqlPool(url);
    worker = await startApp(url, { providers: [Handlers], queue: { maintenance: { enabled: false, completedRetentionMs: 0 } } });
    // A producer whose LISTEN can never connect (closed port): it hears no notice, only its poll reads the row.
    deaf = await startApp(url, {
      queue: { workers: false, migrationsRun: false, listenerUrl: 'postgres://postgres@127.0.0.1:1/none', fallbackPollIntervalMs: 50, maintenance: { enabled: false } },
      logLevels: [],
    });
  });
  afterAll(async () => {
    await deaf?.close();
    await worker?.close();
    await db?.end();
  });

  it("an awaited job is kept, completed with its result, and its waiter gets the result; a job nobody awaited goes", async () => {
    const queue = worker.get(QueueService);
    const awaited = await queue.enqueue('rzw-held', { n: 21 });
    const plain = await queue.enqueue('rzw-held', { n: 5 });
    await waitFor('both running', async () => release.has(awaited) && release.has(plain));
    const waiting = queue.waitFor(awaited, { timeoutMs: 20_000 });
    await waitFor('marked', async () => (await rowOf(db, awaited)).awaited === true);
    release.get(awaited)!();
    release.get(plain)!();
    await expect(waiting).resolves.toEqual({ doubled: 42 });
    expect(await rowOf(db, awaited)).toEqual({ status: 'completed', result: { doubled: 42 }, awaited: true });
    await waitFor('the plain job deleted at its completion', async () => (await rowOf(db, plain)) === undefined);
  });

  it('a waiter that hears no notice reads the kept row by its poll', async () => {
    const queue = deaf.get(QueueService);
    const id = await queue.enqueue('rzw-held', { n: 4 });
    await waitFor('running', async () => release.has(id));
    const waiting = queue.waitFor(id, { timeoutMs: 20_000 });
    await waitFor('marked', async () => (await rowOf(db, id)).awaited === true);
    release.get(id)!();
    await expect(waiting).resolves.toEqual({ doubled: 8 });
  });

  it('a waitFor after the deletion rejects with an error that names the retention', async () => {
    const queue = worker.get(QueueService);
    const id = await queue.enqueue('rzw-held', { n: 1 });
    await waitFor('running', async () => release.has(id));
    release.get(id)!();
    await waitFor('deleted at its completion', async () => (await rowOf(db, id)) === undefined);
    const error = await queue.waitFor(id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PgQueueError);
    expect((error as Error).message).toContain('completedRetentionMs 0');
  });
});
