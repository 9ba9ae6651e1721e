import { Injectable, Scope, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, OnJobEvent, PgQueueError, PgQueueModule, QueueService, type Job, type JobEventName } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

@Injectable()
class A {
  @JobHandler('shared')
  async a() {}
}
@Injectable()
class B {
  @JobHandler('shared')
  async b() {}
}
@Injectable({ scope: Scope.REQUEST })
class PerRequestListener {
  @OnJobEvent('per-request', 'completed')
  onCompleted() {}
}
@Injectable()
class UnknownEvent {
  @OnJobEvent('q', 'finished' as JobEventName)
  onFinished() {}
}
@Injectable()
class BadOptions {
  @JobHandler('bad', { concurrency: 0 })
  async handle() {}
}
@Injectable()
class BadName {
  @JobHandler('no spaces allowed')
  async handle() {}
}

describe('invalid set-up stops the boot with a clear error', () => {
  let url: string;
  beforeAll(async () => {
    url = await createTestDatabase('badboot');
  });

  it('refuses a second handler for the same queue', async () => {
    await expect(startApp(url, { providers: [A, B], logLevels: [] })).rejects.toThrow(
      'Queue "shared" has two @JobHandler methods (A.a and B.b); a queue has exactly one handler.',
    );
  });
  it('refuses an @OnJobEvent listener on a request-scoped provider, and an unknown event name', async () => {
    await expect(startApp(url, { providers: [PerRequestListener], logLevels: [] })).rejects.toThrow(/@OnJobEvent PerRequestListener.onCompleted is on a request-scoped/);
    await expect(startApp(url, { providers: [UnknownEvent], logLevels: [] })).rejects.toThrow(
      '@OnJobEvent on UnknownEvent.onFinished: unknown event "finished"; known events: active, completed, failed, retrying, dead, cancelled, lease-lost, flow-finished.',
    );
  });
  it('refuses an invalid maxResultBytes', async () => {
    await expect(startApp(url, { queue: { maxResultBytes: 0 }, logLevels: [] })).rejects.toThrow(
      'Invalid PgQueueModule option maxResultBytes=0: expected an integer from 2 to 268435456.',
    );
  });
  it('refuses invalid handler options', async () => {
    await expect(startApp(url, { providers: [BadOptions], logLevels: [] })).rejects.toThrow(
      "Invalid @JobHandler('bad') option concurrency=0: expected an integer from 1 to 10000.",
    );
  });
  it('refuses an invalid queue name', async () => {
    await expect(startApp(url, { providers: [BadName], logLevels: [] })).rejects.toThrow('Invalid queue name "no spaces allowed"');
  });
  it('refuses invalid and unknown module options', async () => {
    await expect(startApp(url, { queue: { leaseMs: 'soon' as never }, logLevels: [] })).rejects.toThrow(
      'Invalid PgQueueModule option leaseMs="soon": expected an integer from 1000',
    );
    await expect(startApp(url, { queue: { leaseMs: 5_000, heartbeatMs: 5_000 }, logLevels: [] })).rejects.toThrow(/heartbeatMs=5000: expected less than leaseMs/);
    await expect(startApp(url, { queue: { pollIntervall: 5 } as never, logLevels: [] })).rejects.toThrow('Unknown PgQueueModule option "pollIntervall"');
    await expect(startApp(url, { queue: { queues: { emails: { concurency: 3 } as never } }, logLevels: [] })).rejects.toThrow(`Unknown @JobHandler('emails') option "concurency"`);
  });
  it('refuses to start without a database', async () => {
    await expect(startApp(url, { imports: [PgQueueModule.forRoot({})], logLevels: [] })).rejects.toThrow(/PgQueueModule needs a database/);
  });
});

let db: pg.Pool;

@Injectable()
class Junk {
  @JobHandler('junk', { maxAttempts: 1 })
  async handle(job: Job<{ kind: string }>) {
    const circular: Record<string, unknown> = { name: 'loop' };
    circular.self = circular;
    switch (job.payload.kind) {
      case 'string':
        throw 'plain string thrown';
      case 'object':
        throw { code: 42, reason: 'object thrown' };
      case 'null':
        throw null;
      case 'circular':
        return Promise.reject(circular);
      case 'sync':
        return (() => {
          throw new TypeError('thrown synchronously');
        })();
      default:
        return undefined;
    }
  }
}

describe('bad input at enqueue and from handlers', () => {
  let url: string;
  let app: INestApplicationContext;

  beforeAll(async () => {
    url = await createTestDatabase('badinput');
    db = sqlPool(url);
    app = await startApp(url, { providers: [Junk], queue: { maxPayloadBytes: 1_000 } });
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  const count = async () => (await db.query('SELECT count(*)::int AS n FROM background_jobs')).rows[0].n as number;

  it.each([
    ['a BigInt', { id: 10n }, 'a BigInt at key "id"'],
    ['a circular object', (() => { const o: Record<string, unknown> = {}; o.me = o; return o; })(), 'circular reference'],
    ['a function', { cb: () => 1 }, 'a function at key "cb"'],
    ['a Map', { m: new Map() }, 'a Map at key "m"'],
    ['NaN', { n: NaN }, 'NaN at key "n"'],
    ['undefined', undefined, 'payload is undefined'],
    ['an oversize payload', { s: 'x'.repeat(2_000) }, 'over the maxPayloadBytes limit of 1000'],
  ])('refuses %s at enqueue and stores nothing', async (_what, payload, message) => {
    const before = await count();
    const queue = app.get(QueueService);
    const error = await queue.enqueue('junk', payload).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PgQueueError);
    expect((error as Error).message).toContain('Cannot enqueue to "junk": ');
    expect((error as Error).message).toContain(message);
    expect(await count()).toBe(before);
  });

  it('refuses a whole enqueueMany when one job is bad, naming it', async () => {
    const before = await count();
    await expect(
      app.get(QueueService).enqueueMany([
        { queue: 'junk', payload: { kind: 'ok' } },
        { queue: 'junk', payload: { big: 1n } },
      ]),
    ).rejects.toThrow('enqueueMany: job #1: Cannot enqueue to "junk": the payload is not JSON-serialisable (a BigInt at key "big"');
    expect(await count()).toBe(before);
  });

  it('refuses bad enqueue options and queue names', async () => {
    const queue = app.get(QueueService);
    await expect(queue.enqueue('bad name', {})).rejects.toThrow('Invalid queue name "bad name"');
    await expect(queue.enqueue('junk', {}, { delayMs: -1 })).rejects.toThrow('option delayMs=-1: expected a non-negative integer');
    await expect(queue.enqueue('junk', {}, { runAt: new Date('nope') })).rejects.toThrow('option runAt=null: expected a valid Date');
    await expect(queue.enqueue('junk', {}, { maxAttempts: 0 })).rejects.toThrow('option maxAttempts=0');
    // Out of PostgreSQL's range: these came back as raw DatabaseErrors ("interval out of range", "timestamp out
    // of range"), from every enqueue method, with nothing naming the option.
    const before = await count();
    for (const [options, text] of [
      [{ delayMs: 1e16 }, 'option delayMs=10000000000000000: expected a non-negative integer of at most 31557600000000 (1,000 years)'],
      [{ delayMs: 1e300 }, 'option delayMs=1e+300: expected a non-negative integer of at most 31557600000000 (1,000 years)'],
      [{ runAt: new Date(-8.64e15) }, 'option runAt="-271821-04-20T00:00:00.000Z": expected a valid Date from year 1 to 9999'],
      [{ runAt: new Date(8.64e15) }, 'option runAt="+275760-09-13T00:00:00.000Z": expected a valid Date from year 1 to 9999'],
    ] as const) {
      await expect(queue.enqueue('junk', {}, options)).rejects.toThrow(text);
      await expect(queue.enqueueMany([{ queue: 'junk', payload: {}, ...options }])).rejects.toThrow(text);
      await expect(queue.enqueueUnique('junk', {}, { uniqueKey: 'range', ...options })).rejects.toThrow(text);
    }
    expect(await count()).toBe(before);
    await expect(queue.get('1; DROP TABLE background_jobs')).rejects.toThrow('Invalid job id');
    await expect(queue.get('9223372036854775808')).rejects.toThrow('Invalid job id "9223372036854775808": expected a positive integer within bigint range.');
    expect(await queue.get('9223372036854775807')).toBeNull();
  });

  it('records a readable last_error for whatever a handler throws', async () => {
    const queue = app.get(QueueService);
    const kinds = ['string', 'object', 'null', 'circular', 'sync'];
    const ids = await queue.enqueueMany(kinds.map((kind) => ({ queue: 'junk', payload: { kind } })));
    await waitFor('all dead-lettered', async () => {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1) AND status = 'failed'`, [ids]);
      return rows[0].n === kinds.length;
    });
    const errors = await Promise.all(ids.map(async (id) => (await queue.get(id))!.lastError));
    expect(errors[0]).toBe('plain string thrown');
    expect(errors[1]).toBe("non-Error thrown: { code: 42, reason: 'object thrown' }");
    expect(errors[2]).toMatch(/handler rejected with null/);
    expect(errors[3]).toBe("non-Error thrown: <ref *1> { name: 'loop', self: [Circular *1] }");
    expect(errors[4]).toMatch(/^TypeError: thrown synchronously\n\s+at /);
  });
});
