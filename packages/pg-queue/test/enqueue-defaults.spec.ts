import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp } from './support/test-app.js';

@Injectable()
class Handlers {
  @JobHandler('declared', { maxAttempts: 3 })
  async declared() {}
}

async function maxAttemptsOf(db: ReturnType<typeof sqlPool>, id: string): Promise<number> {
  const { rows } = await db.query(`SELECT max_attempts FROM background_jobs WHERE id = $1`, [id]);
  return rows[0].max_attempts;
}

describe('per-queue settings at enqueue', () => {
  it('an enqueue-only instance (workers: false) stores the module options’ queues maxAttempts', async () => {
    const url = await createTestDatabase('enqonly');
    const db = sqlPool(url);
    const app = await startApp(url, { queue: { workers: false, queues: { once: { maxAttempts: 1 } } } });
    const queue = app.get(QueueService);
    expect(await maxAttemptsOf(db, await queue.enqueue('once', {}))).toBe(1);
    const [a, b] = await queue.enqueueMany([{ queue: 'once', payload: 1 }, { queue: 'other', payload: 2 }]);
    expect([await maxAttemptsOf(db, a), await maxAttemptsOf(db, b)]).toEqual([1, 5]);
    // The enqueue option wins over everything.
    expect(await maxAttemptsOf(db, await queue.enqueue('once', {}, { maxAttempts: 4 }))).toBe(4);
    await app.close();
    await db.end();
  });

  it('precedence: enqueue option > module queues > @JobHandler > 5', async () => {
    const url = await createTestDatabase('enqprec');
    const db = sqlPool(url);
    const withModule = await startApp(url, { providers: [Handlers], queue: { workers: false, queues: { declared: { maxAttempts: 2 } } } });
    expect(await maxAttemptsOf(db, await withModule.get(QueueService).enqueue('declared', {}))).toBe(2);
    await withModule.close();
    const decoratorOnly = await startApp(url, { providers: [Handlers], queue: { workers: false } });
    expect(await maxAttemptsOf(db, await decoratorOnly.get(QueueService).enqueue('declared', {}))).toBe(3);
    await decoratorOnly.close();
    await db.end();
  });
});
