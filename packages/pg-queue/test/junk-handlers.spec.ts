import { Injectable, type INestApplicationContext, type Type } from '@nestjs/common';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { errorLine } from '../src/utils/error-text.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

/**
 * Issue 17, item 9: nothing a handler returns or throws may reach the host process. An Error whose `stack` is
 * not a string, an Error whose `name` is a Symbol (V8 then throws on reading its stack), a returned thenable
 * whose `then` throws: each crashed the process that ran it (the worker settles in promise reactions and
 * microtasks, so whatever the settle path throws leaves the worker), and with an unhandledRejection handler
 * installed the queue's claim loop ended silently instead. Each kind here runs on a queue of its own, in an
 * app of its own, and must fail its job by the rules with a readable last_error, leave the worker claiming
 * (a plain job enqueued after it completes on the same worker), and raise nothing on the process.
 */
const MAX_ATTEMPTS = 2;

/** A revoked Proxy: every operation on it throws, `instanceof` included. */
function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

interface JunkKind {
  /** What the handler does: it is called as the handler itself, so a thenable it returns reaches the worker as is. */
  handle: () => unknown;
  /** The first line of the job's last_error. */
  lastError: string | RegExp;
  /** How many attempts the job ends with: maxAttempts, unless its failure is final. */
  attempts?: number;
}

const JUNK: Record<string, JunkKind> = {
  'stack-not-a-string': {
    handle: async () => {
      const error = new Error('its stack is a number');
      (error as { stack: unknown }).stack = 42;
      throw error;
    },
    lastError: 'Error: its stack is a number',
  },
  'name-is-a-symbol': {
    handle: () => {
      const error = new TypeError('its name is a Symbol');
      (error as { name: unknown }).name = Symbol('junk');
      throw error;
    },
    lastError: 'Symbol(junk): its name is a Symbol',
  },
  'then-throws': {
    handle: () => ({
      then() {
        throw new Error('then() threw synchronously');
      },
    }),
    lastError: 'Error: then() threw synchronously',
  },
  'then-getter-throws': {
    handle: () => ({
      get then(): never {
        throw new Error('the then getter threw');
      },
    }),
    lastError: 'Error: the then getter threw',
  },
  'then-calls-both': {
    // The first call wins, as with a promise: the attempt failed; the later calls change nothing.
    handle: () => ({
      then(resolve: (value: unknown) => void, reject: (reason: unknown) => void) {
        reject(new Error('rejected first'));
        resolve('resolved after');
        reject(new Error('rejected again'));
      },
    }),
    lastError: 'Error: rejected first',
  },
  'then-rejects-revoked-proxy': {
    handle: () => ({
      then(_resolve: (value: unknown) => void, reject: (reason: unknown) => void) {
        reject(revokedProxy());
      },
    }),
    lastError: 'non-Error thrown: <Revoked Proxy>',
  },
  'throws-revoked-proxy': {
    handle: () => {
      throw revokedProxy();
    },
    lastError: 'non-Error thrown: <Revoked Proxy>',
  },
  'throws-symbol': {
    handle: async () => {
      throw Symbol('thrown');
    },
    lastError: 'non-Error thrown: Symbol(thrown)',
  },
  'result-to-json-throws-revoked-proxy': {
    // A result that cannot be stored fails the job for good: a retry would return the same.
    handle: async () => ({
      toJSON() {
        throw revokedProxy();
      },
    }),
    lastError: /^job \d+ \(junk-result-to-json-throws-revoked-proxy\): the handler's result cannot be stored: it is not JSON \(non-Error thrown: <Revoked Proxy>\)/,
    attempts: 1,
  },
};

/** Handler calls per job id, across attempts. */
const calls = new Map<string, number>();

/** The handler of one junk kind's queue: the junk for a junk job, a plain result for a plain one. */
function handlerOf(kind: string): Type {
  @Injectable()
  class JunkHandler {
    @JobHandler(`junk-${kind}`, { concurrency: 1, maxAttempts: MAX_ATTEMPTS, backoff: { baseMs: 10, jitter: false } })
    handle(job: Job<{ plain?: boolean }>): unknown {
      calls.set(job.id, (calls.get(job.id) ?? 0) + 1);
      return job.payload.plain ? { plain: true } : JUNK[kind].handle();
    }
  }
  return JunkHandler;
}

describe('junk from handlers: never reaches the host process', () => {
  let url: string;
  let db: pg.Pool;
  let app: INestApplicationContext | undefined;
  // The host process itself. Jest gives each test file a copy of `process` (process.getBuiltinModule('process')
  // too), whose listeners never hear the process's events; its timers come from the host's realm, and so does
  // their Function constructor, whose functions see the host's globals.
  const host = (setTimeout.constructor as FunctionConstructor)('return process')() as NodeJS.Process;
  const raised: string[] = [];
  const onUncaught = (error: unknown) => void raised.push(`uncaughtException: ${errorLine(error)}`);
  const onUnhandled = (reason: unknown) => void raised.push(`unhandledRejection: ${errorLine(reason)}`);

  beforeAll(async () => {
    url = await createTestDatabase('junk_handlers');
    db = sqlPool(url);
  });
  afterAll(async () => {
    await db?.end();
  });
  beforeEach(() => {
    raised.length = 0;
    host.on('uncaughtException', onUncaught);
    host.on('unhandledRejection', onUnhandled);
  });
  afterEach(async () => {
    host.off('uncaughtException', onUncaught);
    host.off('unhandledRejection', onUnhandled);
    await app?.close();
    app = undefined;
  });

  it('listens on the host process itself', () => {
    expect(host).not.toBe(process);
    expect(host.pid).toBe(process.pid);
    expect(host.listeners('uncaughtException')).toContain(onUncaught);
    expect(host.listeners('unhandledRejection')).toContain(onUnhandled);
  });

  it.each(Object.keys(JUNK))('%s: the job fails by the rules with a readable last_error, and the worker goes on', async (kind) => {
    // A minute between polls: only the worker's own wake-ups (NOTIFY, retry timer) move the jobs.
    app = await startApp(url, { providers: [handlerOf(kind)], queue: { pollIntervalMs: 60_000, shutdownGraceMs: 500 } });
    const queue = app.get(QueueService);
    const id = await queue.enqueue(`junk-${kind}`, {});
    const row = () => db.query<{ status: string; attempts: number; last_error: string | null }>('SELECT status::text, attempts, last_error FROM background_jobs WHERE id = $1', [id]).then((r) => r.rows[0]);
    await waitFor(`the ${kind} job failed for good`, async () => (await row()).status === 'failed', 10_000).catch(() => undefined);
    const junk = await row();

    // Then a plain job on the same queue, so the same worker: it must still claim and settle.
    const plain = await queue.enqueue(`junk-${kind}`, { plain: true });
    await waitFor('the plain job completed', async () => (await queue.get(plain))?.status === 'completed', 10_000).catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 100)); // anything raised late, in a later tick, counts too

    const { lastError, attempts = MAX_ATTEMPTS } = JUNK[kind];
    const expected = typeof lastError === 'string' ? lastError : expect.stringMatching(lastError);
    expect({
      junk: { status: junk.status, attempts: junk.attempts, firstLine: junk.last_error?.split('\n')[0], calls: calls.get(id) },
      plain: (await queue.get(plain))?.status,
      raised,
    }).toEqual({
      junk: { status: 'failed', attempts, firstLine: expected, calls: attempts },
      plain: 'completed',
      raised: [],
    });
  });
});
