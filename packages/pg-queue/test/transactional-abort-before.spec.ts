import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { DataSource, type QueryRunner } from 'typeorm';
import { JobHandler, PgQueueModule, QueueService, type TransactionalJob } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// A transactional handler runs inside a transaction of the app's DataSource, opened before it is called. An attempt
// aborted while that transaction opened (here its timeout fires while every connection of the app's pool is taken;
// in the simulation's seed 46, a process frozen past the timeout and the lease) must not call the handler at all:
// its job may already run elsewhere, and the handler's work outside the transaction would be done twice.
const calls: string[] = [];

@Injectable()
class Handlers {
  @JobHandler('tab', { transactional: true, timeoutMs: 300, maxAttempts: 1 })
  async run(job: TransactionalJob) {
    calls.push(job.id);
  }
}

describe('a transactional attempt aborted before its transaction opened', () => {
  let db: pg.Pool;
  let dataSource: DataSource;
  let app: INestApplicationContext;
  beforeAll(async () => {
    const url = await createTestDatabase('tx_abort_before');
    db = sqlPool(url);
    dataSource = new DataSource({ type: 'postgres', url, extra: { max: 1 } });
    app = await startApp(url, { providers: [Handlers], imports: [PgQueueModule.forRoot({ dataSource, maintenance: { enabled: false } })] });
  });
  afterAll(async () => {
    await app?.close();
    await dataSource?.destroy();
    await db?.end();
  });

  it('never calls the handler: the job fails with its timeout, and nothing ran', async () => {
    // The app's one connection, taken: the attempt's transaction waits for it past the 300 ms timeout.
    const runner: QueryRunner = dataSource.createQueryRunner();
    await runner.connect();
    await runner.query('SELECT 1');
    const id = await app.get(QueueService).enqueue('tab', {});
    await new Promise((resolve) => setTimeout(resolve, 800));
    await runner.release();
    await waitFor('the attempt ended', async () => (await db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0].status === 'failed', 10_000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const { rows: [row] } = await db.query<{ last_error: string }>(`SELECT last_error FROM background_jobs WHERE id = $1`, [id]);
    expect({ calls, error: row.last_error.split('\n')[0] }).toEqual({ calls: [], error: expect.stringContaining('timed out after 300 ms') });
  }, 30_000);
});
