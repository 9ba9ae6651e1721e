import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './faults/support/build-worker.js';
import { forkLoaded, startForked } from './support/serve-start.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';
import { generatePrismaClient, ORDERS_TABLE } from './transactions/prisma-client.js';

// Option ambientTransactions: an enqueue with no `manager` inside a @Transactional() call of
// @nestjs-cls/transactional joins that call's transaction, through its TypeORM adapter and its Prisma adapter (a
// named connection); outside one it autocommits. The apps run as their own processes (transactions/ambient-app.ts
// says why); what they did is read back from the tables here.

type Adapter = 'typeorm' | 'prisma' | 'none';

/** Calls a method of the forked app's Checkout service and returns its answer. */
function caller(child: ChildProcess) {
  let next = 0;
  return <T>(method: string, email: string, fail = false): Promise<T> =>
    new Promise((resolve, reject) => {
      const id = ++next;
      const answer = (m: { type: string; id: number; value?: T; error?: string }) => {
        if (m.type !== 'answer' || m.id !== id) return;
        child.off('message', answer);
        if (m.error !== undefined) reject(new Error(m.error));
        else resolve(m.value as T);
      };
      child.on('message', answer);
      child.send({ type: 'call', id, method, email, fail });
    });
}

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => join(e.parentPath, e.name));
}

describe('ambient transactions (@nestjs-cls/transactional)', () => {
  let url: string;
  let db: pg.Pool;
  let build: WorkerBuild;
  let prismaClient: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    url = await createTestDatabase('ambient-tx');
    db = sqlPool(url);
    await db.query(ORDERS_TABLE);
    const generated = await generatePrismaClient('ambient-spec');
    build = await buildWorker([fileURLToPath(new URL('./transactions/ambient-app.ts', import.meta.url)), ...(await listFiles(dirname(generated)))]);
    // The compiled client sits where buildWorker put its source, under the build's test/ folder.
    prismaClient = join(dirname(build.script), '..', '.prisma', 'ambient-spec', 'client', 'client.js');
  }, 120_000);
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await build?.remove();
    await db?.end();
  });

  async function boot(adapter: Adapter, testing?: 'inline'): Promise<ChildProcess> {
    const child = await forkLoaded(build.script, { PG_QUEUE_PRISMA_CLIENT: prismaClient });
    children.push(child);
    return startForked(child, { url, adapter, testing });
  }

  /** Kills a forked app and waits until it is gone, its LISTEN connection and worker loops with it. */
  async function stop(child: ChildProcess): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  const count = async (sql: string, values: unknown[]) => (await db.query<{ n: number }>(sql, values)).rows[0].n;
  const jobsTo = (prefix: string) => count(`SELECT count(*)::int AS n FROM background_jobs WHERE payload->>'to' LIKE $1`, [`${prefix}%`]);
  const ordersOf = (prefix: string) => count(`SELECT count(*)::int AS n FROM orders WHERE email LIKE $1`, [`${prefix}%`]);
  const statusOf = async (id: string) => (await db.query<{ status: string }>('SELECT status FROM background_jobs WHERE id = $1', [id])).rows[0]?.status;

  describe.each(['typeorm', 'prisma'] as const)('through the %s adapter', (adapter) => {
    let call: ReturnType<typeof caller>;
    let app: ChildProcess | undefined;
    beforeAll(async () => {
      app = await boot(adapter);
      call = caller(app);
    }, 60_000);
    // Its workers handle 'emails' on this database and wake on every commit's NOTIFY: left running, they race the
    // inline kit's test below for its job (and, winning, leave it 'processing' until their batched outcome write).
    afterAll(async () => {
      if (app) await stop(app);
    });

    it('an enqueue in a @Transactional() call commits with the call’s own row, and the commit wakes a worker', async () => {
      const email = `${adapter}-commit`;
      const placed = await call<{ id: string; visibleOutside: boolean }>('placeOrder', email);
      expect(placed.visibleOutside).toBe(false); // another connection did not see it before the call's commit
      // The worker's safety poll is a minute away: the run comes from the commit's NOTIFY.
      await waitFor('the job completed', async () => (await statusOf(placed.id)) === 'completed', 10_000);
      expect(await ordersOf(email)).toBe(1);
    });

    it('a rollback takes the jobs of enqueue, enqueueMany, enqueueUnique and enqueueFlow with the row', async () => {
      const email = `${adapter}-rollback`;
      await expect(call('placeOrder', email, true)).rejects.toThrow('payment declined');
      await expect(call('placeBig', `${email}-big`, true)).rejects.toThrow('payment declined');
      expect(await jobsTo(email)).toBe(0);
      expect(await ordersOf(email)).toBe(0);
    });

    it('enqueueMany, enqueueUnique and enqueueFlow in one call commit together and run', async () => {
      const email = `${adapter}-big`;
      await call('placeBig', email);
      expect(await ordersOf(email)).toBe(1);
      expect(await jobsTo(email)).toBe(4);
      await waitFor('all four jobs completed', async () => (await count(`SELECT count(*)::int AS n FROM background_jobs WHERE payload->>'to' LIKE $1 AND status = 'completed'`, [`${email}%`])) === 4, 10_000);
    });

    it('outside a @Transactional() call an enqueue autocommits', async () => {
      const email = `${adapter}-alone`;
      const alone = await call<{ id: string; visibleOutside: boolean }>('enqueueAlone', email);
      expect(alone.visibleOutside).toBe(true);
      await waitFor('the job completed', async () => (await statusOf(alone.id)) === 'completed', 10_000);
    });
  });

  it('under the testing kit, inline: an enqueue in a @Transactional() call joins it, runs at its commit, and goes with its rollback', async () => {
    const inline = caller(await boot('typeorm', 'inline'));
    const email = 'inline-commit';
    const placed = await inline<{ id: string; visibleOutside: boolean }>('placeOrder', email);
    expect(placed.visibleOutside).toBe(false);
    // Run by the kit when the transaction committed, before the call returned: no worker loop runs here.
    expect(await statusOf(placed.id)).toBe('completed');
    expect(await ordersOf(email)).toBe(1);
    await expect(inline('placeOrder', 'inline-rollback', true)).rejects.toThrow('payment declined');
    await expect(inline('placeBig', 'inline-rollback-big', true)).rejects.toThrow('payment declined');
    expect(await jobsTo('inline-rollback')).toBe(0);
    expect(await ordersOf('inline-rollback')).toBe(0);
  });

  it('without the plugin registered the app does not start, and says what to register', async () => {
    const child = await forkLoaded(build.script, { PG_QUEUE_PRISMA_CLIENT: prismaClient });
    children.push(child);
    const said = new Promise<string>((resolve) => child.on('message', (m: { type: string; message?: string }) => m.type === 'boot-error' && resolve(m.message!)));
    await expect(startForked(child, { url, adapter: 'none' })).rejects.toThrow(/exited with 1/);
    expect(await said).toMatch(/option ambientTransactions\): no TransactionHost in this app; register the plugin/);
  });

  it('refuses an ambientTransactions option it cannot read, at boot', async () => {
    await expect(startApp(url, { queue: { ambientTransactions: 'yes' as never } })).rejects.toThrow(
      /Invalid PgQueueModule option ambientTransactions="yes": expected true, false or \{ connectionName: string \}/,
    );
  });
});
