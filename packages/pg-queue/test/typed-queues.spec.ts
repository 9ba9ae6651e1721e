import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { defineQueue, InvalidPayloadError, JobHandler, PgQueueError, QueueService, type Job } from 'nestjs-pg-queue';
import { useTestApp, waitFor } from './support/test-app.js';

interface EmailJob {
  to: string;
  subject: string;
}

/** A hand-written validator, as an app would write one (or wrap zod / class-validator in). */
const validateEmail = (payload: unknown) => {
  const p = payload as Partial<EmailJob> | null;
  if (typeof p?.to !== 'string' || !p.to.includes('@')) return 'to must be an email address';
  if (typeof p.subject !== 'string') throw new TypeError('subject must be a string');
};

const Emails = defineQueue<EmailJob, { messageId: string }>('ty-emails', { validate: validateEmail });
const Counts = defineQueue<{ n: number }>('ty-counts', {
  // An async validator (a lookup, class-validator's validate()): awaited before anything is stored.
  validate: async (payload) => {
    await new Promise((r) => setTimeout(r, 1));
    if ((payload as { n: number }).n < 0) throw new RangeError('n must not be negative');
  },
});
const Never = defineQueue<{ any?: number }>('ty-never', { validate: () => false });
const Plain = defineQueue<{ x: number }>('ty-plain');

const handled = new Map<string, unknown>();

@Injectable()
class Handlers {
  @JobHandler(Emails, { concurrency: 2 })
  async send(job: Job<EmailJob>): Promise<{ messageId: string }> {
    handled.set(job.id, job.payload);
    return { messageId: `m-${job.id}` };
  }

  @JobHandler(Counts)
  async count(job: Job<{ n: number }>): Promise<void> {
    handled.set(job.id, job.payload);
  }
}

describe('typed queues: defineQueue in @JobHandler and enqueue, with a validator run at every enqueue', () => {
  const t = useTestApp('typed', { providers: [Handlers], queue: { maintenance: { enabled: false } } });
  const count = async (queue?: string) =>
    (await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE $1::text IS NULL OR queue_name = $1`, [queue ?? null])).rows[0].n as number;
  const refusal = async (call: Promise<unknown>) => {
    const error = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidPayloadError);
    return error as InvalidPayloadError;
  };

  it('a handler declared with a definition runs the jobs enqueued through it', async () => {
    const id = await t.app.get(QueueService).enqueue(Emails, { to: 'ada@example.com', subject: 'hi' });
    await waitFor('handled', async () => handled.has(id));
    expect(handled.get(id)).toEqual({ to: 'ada@example.com', subject: 'hi' });
    await waitFor('completed', async () => (await t.db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0].status === 'completed');
  });

  it('a refused payload throws with the validator’s message and the queue, and nothing is stored: through the definition or the queue’s name', async () => {
    const queue = t.app.get(QueueService);
    const before = await count('ty-emails');
    const returned = await refusal(queue.enqueue(Emails, { to: 'nobody', subject: 'x' }));
    expect(returned.message).toBe('enqueue("ty-emails"): the payload was refused by the validator of queue "ty-emails": to must be an email address. Nothing was enqueued.');
    expect(returned).toMatchObject({ queue: 'ty-emails', reason: 'to must be an email address', index: undefined });
    expect(returned).toBeInstanceOf(PgQueueError);

    const thrown = await refusal(queue.enqueue('ty-emails', { to: 'ada@example.com' }));
    expect(thrown.message).toBe('enqueue("ty-emails"): the payload was refused by the validator of queue "ty-emails": subject must be a string. Nothing was enqueued.');
    expect(thrown.cause).toBeInstanceOf(TypeError);

    const unique = await refusal(queue.enqueueUnique(Emails, { to: 'x', subject: 'y' }, { uniqueKey: 'k' }));
    expect(unique.message).toMatch(/^enqueueUnique\("ty-emails"\): the payload was refused/);
    expect(await count('ty-emails')).toBe(before);
  });

  it('enqueueMany and enqueueManyUnique: one refused payload refuses the whole batch, named by its position', async () => {
    const queue = t.app.get(QueueService);
    const before = await count();
    const many = await refusal(
      queue.enqueueMany([
        { queue: Plain, payload: { x: 1 } },
        { queue: Counts, payload: { n: 1 } },
        { queue: 'ty-emails', payload: { to: 'a@example.com', subject: 's' } },
        { queue: Emails, payload: { to: 'broken', subject: 's' } },
        { queue: Counts, payload: { n: -1 } },
      ]),
    );
    // The first refusal in call order, though a later async one was judged too.
    expect(many.message).toBe('enqueueMany: job #3: the payload was refused by the validator of queue "ty-emails": to must be an email address. Nothing was enqueued.');
    expect(many.index).toBe(3);
    const manyUnique = await refusal(
      queue.enqueueManyUnique([
        { queue: Counts, payload: { n: 2 }, uniqueKey: 'a' },
        { queue: Counts, payload: { n: -2 }, uniqueKey: 'b' },
      ]),
    );
    expect(manyUnique.message).toBe('enqueueManyUnique: job #1: the payload was refused by the validator of queue "ty-counts": n must not be negative. Nothing was enqueued.');
    expect(manyUnique.cause).toBeInstanceOf(RangeError);
    expect(await count()).toBe(before);

    // All accepted: all stored, in order.
    const ids = await queue.enqueueMany([
      { queue: Counts, payload: { n: 3 } },
      { queue: Plain, payload: { x: 2 } },
      { queue: 'ty-counts', payload: { n: 4 } },
    ]);
    const { rows } = await t.db.query(`SELECT queue_name, payload FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id`, [ids]);
    expect(rows).toEqual([
      { queue_name: 'ty-counts', payload: { n: 3 } },
      { queue_name: 'ty-plain', payload: { x: 2 } },
      { queue_name: 'ty-counts', payload: { n: 4 } },
    ]);
  });

  it('a validator that returns false refuses; queues without one take any payload', async () => {
    const queue = t.app.get(QueueService);
    const refused = await refusal(queue.enqueue(Never, {}));
    expect(refused.reason).toBe('the validator returned false');
    expect(await count('ty-never')).toBe(0);
    await queue.enqueue(Plain, { x: 3 });
    await queue.enqueue('ty-unknown', { anything: true });
    expect(await count('ty-unknown')).toBe(1);
  });

  it('defineQueue refuses a bad name, an unknown option, a validator that is not a function, and a second validator for one queue', () => {
    expect(() => defineQueue('bad name')).toThrow('Invalid queue name "bad name"');
    expect(() => defineQueue('ty-x', { validator: () => true } as never)).toThrow('defineQueue("ty-x"): unknown option "validator"; known options: validate.');
    expect(() => defineQueue('ty-x', { validate: 'yes' as never })).toThrow('defineQueue("ty-x"): validate must be a function (payload) => void | boolean | string, got "yes".');
    expect(() => defineQueue('ty-emails', { validate: () => true })).toThrow(
      'defineQueue("ty-emails"): the queue is already defined with another validator; define each queue once',
    );
    // The same definition loaded twice (the same validator), or one without a validator, is fine.
    expect(defineQueue<EmailJob>('ty-emails', { validate: validateEmail }).name).toBe('ty-emails');
    expect(defineQueue<EmailJob>('ty-emails').validate).toBeUndefined();
  });

  it('a job enqueued where the validator was not loaded (raw SQL, the CLI) is checked before its handler runs: refused, it fails for good at once', async () => {
    const { rows } = await t.db.query<{ id: string }>(
      `INSERT INTO background_jobs (queue_name, payload, max_attempts) VALUES ('ty-emails', '[1, 2]', 5), ('ty-counts', '{"n": -1}', 5), ('ty-counts', '{"n": 7}', 5) RETURNING id::text`,
    );
    const [array, negative, fine] = rows.map((r) => r.id);
    const row = async (id: string) =>
      (await t.db.query(`SELECT status::text AS status, attempts, last_error FROM background_jobs WHERE id = $1`, [id])).rows[0] as { status: string; attempts: number; last_error: string | null };
    await waitFor('the refused jobs to fail and the good one to complete', async () =>
      (await row(array)).status === 'failed' && (await row(negative)).status === 'failed' && (await row(fine)).status === 'completed');
    // One attempt each of five, dead-lettered with the validator's reason; the handler never saw the payloads.
    expect(await row(array)).toMatchObject({
      status: 'failed',
      attempts: 1,
      last_error: `job ${array}: the payload was refused by the validator of queue "ty-emails": to must be an email address. The handler did not run; the job fails without retries (each would bring the same payload).`,
    });
    expect(await row(negative)).toMatchObject({ status: 'failed', attempts: 1, last_error: expect.stringContaining('validator of queue "ty-counts": n must not be negative. The handler did not run') });
    expect([handled.has(array), handled.has(negative), handled.get(fine)]).toEqual([false, false, { n: 7 }]);
  });

  it('a definition without a validator still gets the queue’s validator when another definition of it has one', async () => {
    const Again = defineQueue<EmailJob>('ty-emails');
    await refusal(t.app.get(QueueService).enqueue(Again, { to: 'nobody', subject: 's' }));
  });
});
