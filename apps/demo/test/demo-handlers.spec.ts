import { Logger, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { getQueueTestKit, overrideQueueForTesting, type QueueTestKit } from 'nestjs-pg-queue/testing';
import { createTestDatabase } from '@internal/pg-harness';
import { AppModule } from '../src/app.module.js';
import { OrdersService } from '../src/orders/orders.service.js';

// The demo's handlers, tested as an app would test its own with nestjs-pg-queue/testing: the demo's
// AppModule unchanged, its queue in manual mode (no workers; drain() runs the jobs through the real
// handlers and the real claim and settle statements), on a database of its own.
describe('demo handlers (testing kit, manual mode)', () => {
  let app: INestApplication;
  let queue: QueueTestKit;
  let url: string;
  const sql = async (text: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return await client.query<{ id: string }>(text);
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    url = await createTestDatabase('demo-handlers');
    const moduleRef = await overrideQueueForTesting(Test.createTestingModule({ imports: [AppModule.forRoot(url, { startBurst: 0 })] }), { mode: 'manual' }).compile();
    app = moduleRef.createNestApplication({ logger: ['error'] });
    await app.init();
    queue = getQueueTestKit(app);
  });
  afterAll(async () => {
    await app?.close();
  });
  beforeEach(async () => {
    await queue.clear();
  });
  afterEach(() => {
    jest.restoreAllMocks();
  });

  it("an order enqueues its confirmation email in the order's transaction; draining sends it", async () => {
    const { orderId, jobId } = await app.get(OrdersService).place({ email: 'ada@example.com', item: 'keyboard', amount: 49.9 });
    const job = await queue.expectEnqueued('emails', { to: 'ada@example.com', orderId, subject: `Order #${orderId} confirmed` }, { status: 'queued' });
    expect(job).toMatchObject({ id: jobId, uniqueKey: `order-confirmation:${orderId}` });

    expect(await queue.drain()).toEqual([expect.objectContaining({ id: jobId, queue: 'emails', attempt: 1, outcome: 'completed' })]);
    await queue.expectEnqueued('emails', { orderId }, { status: 'completed' });
  });

  it('a refused order rolls back with its email: nothing is enqueued, nothing runs', async () => {
    await expect(app.get(OrdersService).place({ email: 'bob@example.com', item: 'mouse', amount: 0 })).rejects.toThrow(/amount/);
    await queue.expectNotEnqueued('emails');
    expect(await queue.drain()).toEqual([]);
  });

  it('a flaky sync fails, is retried on its backoff once the clock moves, then completes', async () => {
    // The pretend CRM fails when Math.random() < 0.4: draw the pause (0.5), then a failure (0.1); every later
    // draw (the backoff's jitter, the second attempt's pause and check) is 0.9, a success.
    const draws = [0.5, 0.1];
    jest.spyOn(Math, 'random').mockImplementation(() => draws.shift() ?? 0.9);
    const id = await app.get(QueueService).enqueue('sync', { recordId: 7 });

    const [first] = await queue.drain();
    expect(first).toMatchObject({ id, attempt: 1, outcome: 'retried' });
    expect((first.error as Error).message).toBe('CRM unavailable: 503 for record 7');
    // backoff { baseMs: 500 }: 500 x 2^1 with +20% jitter (0.9 drawn).
    expect(first.retryInMs).toBe(1_200);
    // The retry is not due yet: nothing runs until the queue's clock moves past it. (The kit's clock is the database's,
    // moved by advanceBy: a check that 1 of the 1.2 s is not enough left 200 ms of real time, which a loaded machine
    // took between the failure and the next claim: round 13f.)
    expect(await queue.drain()).toEqual([]);
    expect(await queue.drain({ advanceBy: 2_000 })).toEqual([expect.objectContaining({ id, attempt: 2, outcome: 'completed' })]);
    const [row] = await queue.jobs('sync');
    expect(row).toMatchObject({ id, status: 'completed', attempts: 2, lastError: expect.stringMatching(/^Error: CRM unavailable: 503 for record 7\n/) });
  });

  it('the per-minute orders report never fires by itself in a test; fireSchedule runs one report', async () => {
    const id = await queue.fireSchedule('orders-report');
    expect(await queue.drain()).toEqual([expect.objectContaining({ id, queue: 'orders-report', attempt: 1, outcome: 'completed' })]);
  });

  it('a job enqueued outside the app with a payload its queue refuses (pg-queue enqueue emails \'[1,2]\') is dead-lettered at once, unsent', async () => {
    // As the CLI stores it: by the queue's name, without the app's validators (another process).
    const { rows: [inserted] } = await sql(`INSERT INTO background_jobs (queue_name, payload) VALUES ('emails', '[1, 2]') RETURNING id::text`);
    const sent = jest.spyOn(Logger.prototype, 'log');
    const [drained] = await queue.drain();
    expect(drained).toMatchObject({ id: inserted.id, queue: 'emails', attempt: 1, outcome: 'failed' });
    const [row] = await queue.jobs('emails');
    expect(row).toMatchObject({
      id: inserted.id,
      status: 'failed',
      attempts: 1,
      lastError: `job ${inserted.id}: the payload was refused by the validator of queue "emails": expected an object { to, subject, body, orderId? }, got [1,2]. The handler did not run; the job fails without retries (each would bring the same payload).`,
    });
    expect(sent.mock.calls.filter(([line]) => /sent/.test(String(line)))).toEqual([]);
  });

  it('the demo refuses a bad payload at enqueue too, naming the field', async () => {
    await expect(app.get(QueueService).enqueue('thumbnails', { imageId: 1, width: 0 })).rejects.toThrow(
      'enqueue("thumbnails"): the payload was refused by the validator of queue "thumbnails": width must be an integer from 1 to 4096, got 0. Nothing was enqueued.',
    );
    await queue.expectNotEnqueued('thumbnails');
  });

  it('a corrupt record fails every attempt and ends dead-lettered (status failed) with its last error', async () => {
    const id = await app.get(QueueService).enqueue('sync', { recordId: 13, corrupt: true });
    const drained = await queue.drain({ includeScheduled: true });
    expect(drained.map((d) => [d.attempt, d.outcome])).toEqual([
      [1, 'retried'],
      [2, 'retried'],
      [3, 'failed'],
    ]);
    const [row] = await queue.jobs('sync');
    expect(row).toMatchObject({ id, status: 'failed', attempts: 3, maxAttempts: 3 });
    expect(row.lastError).toContain('CRM rejected record 13: 422 field "email" is invalid');
  });
});
