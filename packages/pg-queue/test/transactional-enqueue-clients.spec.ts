import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { Kysely, PostgresDialect } from 'kysely';
import { drizzle } from 'drizzle-orm/node-postgres';
import { pgTable, serial, text } from 'drizzle-orm/pg-core';
import { EntitySchema, MikroORM } from '@mikro-orm/postgresql';
import { PrismaPg } from '@prisma/adapter-pg';
import { JobHandler, PgQueueError, QueueService, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { callerTransaction, type TransactionClient } from '../src/transactions/transaction-client.js';
import { generatePrismaClient, ORDERS_TABLE } from './transactions/prisma-client.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// Transactional enqueue through each client a Nest app may write with: the job commits and rolls back with the
// app's own row, written with that client's own API; the commit (not the enqueue) wakes the worker, whose safety
// poll is a minute away; enqueueMany, enqueueUnique and enqueueFlow join the transaction too; and the call that
// needs a savepoint (a refused flow, a call of several statements) leaves the caller's transaction usable.

const ran: string[] = [];

@Injectable()
class Mailer {
  @JobHandler('emails')
  async send(job: Job<{ to: string }>) {
    ran.push(job.payload.to);
  }
}

/** A client, as a test drives it: `transaction` commits what `work` did, or rolls back when it throws. */
interface ClientCase {
  name: string;
  transaction<T>(work: (manager: TransactionClient, addOrder: (email: string) => Promise<unknown>) => Promise<T>): Promise<T>;
  /** The same client outside any transaction (each statement autocommits). */
  outside(): Promise<{ client: TransactionClient; done(): Promise<void> }>;
  close(): Promise<void>;
}

interface OrderRow {
  id: number;
  email: string;
}

async function clientCases(url: string): Promise<ClientCase[]> {
  const insertOrder = 'INSERT INTO orders (email) VALUES ($1)';

  const dataSource = await new DataSource({ type: 'postgres', url }).initialize();
  const typeorm: ClientCase = {
    name: 'TypeORM EntityManager',
    transaction: (work) => dataSource.transaction((manager) => work(manager, (email) => manager.query(insertOrder, [email]))),
    outside: async () => ({ client: dataSource.manager, done: async () => undefined }),
    close: () => dataSource.destroy(),
  };

  const pool = new pg.Pool({ connectionString: url, max: 3 });
  const pgCase: ClientCase = {
    name: 'pg PoolClient',
    transaction: async (work) => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        try {
          const result = await work(client, (email) => client.query(insertOrder, [email]));
          await client.query('COMMIT');
          return result;
        } catch (error) {
          await client.query('ROLLBACK');
          throw error;
        }
      } finally {
        client.release();
      }
    },
    outside: async () => {
      const client = await pool.connect();
      return { client, done: async () => client.release() };
    },
    close: () => pool.end(),
  };

  const clientPath = await generatePrismaClient('clients-spec');
  const { PrismaClient } = (await import(clientPath)) as {
    PrismaClient: new (options: { adapter: unknown }) => {
      $queryRawUnsafe(query: string, ...values: unknown[]): Promise<unknown>;
      $transaction<T>(work: (tx: { order: { create(args: { data: { email: string } }): Promise<unknown> }; $queryRawUnsafe(query: string, ...values: unknown[]): Promise<unknown> }) => Promise<T>): Promise<T>;
      $disconnect(): Promise<void>;
    };
  };
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
  const prismaCase: ClientCase = {
    name: 'Prisma interactive transaction',
    transaction: (work) => prisma.$transaction((tx) => work(tx, (email) => tx.order.create({ data: { email } }))),
    outside: async () => ({ client: prisma, done: async () => undefined }),
    close: () => prisma.$disconnect(),
  };

  const kysely = new Kysely<{ orders: { id: pg.QueryResultRow['id']; email: string } }>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 3 }) }) });
  const kyselyCase: ClientCase = {
    name: 'Kysely Transaction',
    transaction: (work) => kysely.transaction().execute((trx) => work(trx, (email) => trx.insertInto('orders').values({ email } as never).execute())),
    outside: async () => ({ client: kysely, done: async () => undefined }),
    close: () => kysely.destroy(),
  };

  const orders = pgTable('orders', { id: serial('id').primaryKey(), email: text('email').notNull() });
  const drizzlePool = new pg.Pool({ connectionString: url, max: 3 });
  const db = drizzle(drizzlePool);
  const drizzleCase: ClientCase = {
    name: 'Drizzle transaction',
    transaction: (work) => db.transaction((tx) => work(tx, (email) => tx.insert(orders).values({ email }))),
    outside: async () => ({ client: db, done: async () => undefined }),
    close: () => drizzlePool.end(),
  };

  const Order = new EntitySchema<OrderRow>({ name: 'Order', tableName: 'orders', properties: { id: { type: 'number', primary: true }, email: { type: 'string' } } });
  const orm = await MikroORM.init({ clientUrl: url, entities: [Order], allowGlobalContext: true, debug: false });
  const mikroCase: ClientCase = {
    name: 'MikroORM EntityManager',
    transaction: (work) =>
      orm.em.fork().transactional((em) =>
        work(em, async (email) => {
          em.persist(em.create(Order, { email } as OrderRow));
          await em.flush();
        }),
      ),
    outside: async () => ({ client: orm.em.fork(), done: async () => undefined }),
    close: () => orm.close(),
  };

  return [typeorm, pgCase, prismaCase, kyselyCase, drizzleCase, mikroCase];
}

describe('transactional enqueue through each client', () => {
  let url: string;
  let app: INestApplicationContext;
  let queue: QueueService;
  let db: pg.Pool;
  let cases: ClientCase[];

  beforeAll(async () => {
    url = await createTestDatabase('tx-clients');
    db = sqlPool(url);
    await db.query(ORDERS_TABLE);
    // A minute between safety polls: a job that runs within seconds of the commit was woken by it.
    app = await startApp(url, { providers: [Mailer], queue: { pollIntervalMs: 60_000, fallbackPollIntervalMs: 60_000 } });
    queue = app.get(QueueService);
    cases = await clientCases(url);
  }, 120_000);
  afterAll(async () => {
    await Promise.all((cases ?? []).map((c) => c.close()));
    await app?.close();
    await db?.end();
  });

  const count = async (sql: string, values: unknown[]) => (await db.query<{ n: number }>(sql, values)).rows[0].n;
  const jobsTo = (prefix: string) => count(`SELECT count(*)::int AS n FROM background_jobs WHERE payload->>'to' LIKE $1`, [`${prefix}%`]);
  const ordersOf = (prefix: string) => count(`SELECT count(*)::int AS n FROM orders WHERE email LIKE $1`, [`${prefix}%`]);
  const tag = (c: ClientCase, what: string) => `${c.name.split(' ')[0].toLowerCase()}-${what}`;

  it.each(['TypeORM EntityManager', 'pg PoolClient', 'Prisma interactive transaction', 'Kysely Transaction', 'Drizzle transaction', 'MikroORM EntityManager'])(
    '%s: the job commits with the app’s row, and the commit wakes a worker',
    async (name) => {
      const c = cases.find((k) => k.name === name)!;
      const to = tag(c, 'commit');
      const id = await c.transaction(async (manager, addOrder) => {
        await addOrder(to);
        const jobId = await queue.enqueue('emails', { to }, { manager });
        expect(await jobsTo(to)).toBe(0); // not visible outside the transaction yet
        return jobId;
      });
      const done = await waitFor('the job completed', async () => (await queue.get(id))?.status === 'completed', 10_000);
      expect(done).toBe(true);
      expect(ran).toContain(to);
      expect(await ordersOf(to)).toBe(1);
    },
  );

  it.each(['TypeORM EntityManager', 'pg PoolClient', 'Prisma interactive transaction', 'Kysely Transaction', 'Drizzle transaction', 'MikroORM EntityManager'])(
    '%s: a rollback takes the jobs of enqueue, enqueueMany, enqueueUnique and enqueueFlow with it',
    async (name) => {
      const c = cases.find((k) => k.name === name)!;
      const to = tag(c, 'rollback');
      await expect(
        c.transaction(async (manager, addOrder) => {
          await addOrder(to);
          await queue.enqueue('emails', { to: `${to}-one` }, { manager });
          await queue.enqueueMany([{ queue: 'emails', payload: { to: `${to}-many1` } }, { queue: 'emails', payload: { to: `${to}-many2` } }], { manager });
          await queue.enqueueUnique('emails', { to: `${to}-unique` }, { manager, uniqueKey: `${to}-key` });
          await queue.enqueueFlow({ jobs: [{ ref: 'a', queue: 'emails', payload: { to: `${to}-flow-a` } }, { ref: 'b', queue: 'emails', payload: { to: `${to}-flow-b` }, dependsOn: ['a'] }] }, { manager });
          expect(await count(`SELECT count(*)::int AS n FROM background_jobs WHERE payload->>'to' LIKE $1`, [`${to}%`])).toBe(0);
          throw new Error('payment declined');
        }),
      ).rejects.toThrow('payment declined');
      expect(await jobsTo(to)).toBe(0);
      expect(await ordersOf(to)).toBe(0);
      expect(await count(`SELECT count(*)::int AS n FROM background_flows f WHERE NOT EXISTS (SELECT 1 FROM background_jobs j WHERE j.flow_id = f.id)`, [])).toBe(0);
    },
  );

  it.each(['TypeORM EntityManager', 'pg PoolClient', 'Prisma interactive transaction', 'Kysely Transaction', 'Drizzle transaction', 'MikroORM EntityManager'])(
    '%s: a flow refused for a held key leaves the transaction usable, and the rest commits and runs',
    async (name) => {
      const c = cases.find((k) => k.name === name)!;
      const to = tag(c, 'refused');
      await queue.enqueue('emails', { to: `${to}-holder` }, { uniqueKey: `${to}-key`, runAt: new Date(Date.now() + 3_600_000) });
      const [unique, flow] = await c.transaction(async (manager, addOrder) => {
        await addOrder(`${to}-1`);
        await expect(
          queue.enqueueFlow({ jobs: [{ ref: 'a', queue: 'emails', payload: { to: `${to}-flow` }, uniqueKey: `${to}-key` }] }, { manager }),
        ).rejects.toThrow(PgQueueError);
        await addOrder(`${to}-2`);
        const dup = await queue.enqueueUnique('emails', { to: `${to}-dup` }, { manager, uniqueKey: `${to}-key` });
        const f = await queue.enqueueFlow({ jobs: [{ ref: 'a', queue: 'emails', payload: { to: `${to}-a` } }, { ref: 'b', queue: 'emails', payload: { to: `${to}-b` }, dependsOn: ['a'] }] }, { manager });
        return [dup, f] as const;
      });
      expect(unique.duplicate).toBe(true);
      expect(await ordersOf(to)).toBe(2);
      expect(await jobsTo(`${to}-flow`)).toBe(0);
      await waitFor('the flow completed', async () => (await queue.getFlow(flow.id))?.status === 'completed', 10_000);
      expect(ran).toEqual(expect.arrayContaining([`${to}-a`, `${to}-b`]));
    },
  );

  it.each(['TypeORM EntityManager', 'pg PoolClient', 'Prisma interactive transaction', 'Kysely Transaction', 'Drizzle transaction', 'MikroORM EntityManager'])(
    '%s: a call of several statements is all-or-nothing inside a transaction (savepoint) and outside one (a transaction of its own)',
    async (name) => {
      const c = cases.find((k) => k.name === name)!;
      const to = tag(c, 'atomic');
      const insert = `INSERT INTO orders (email) VALUES ($1)`;
      const refused = (tx: ReturnType<typeof callerTransaction>, email: string) =>
        tx.atomically(async (inner) => {
          await inner.query(insert, [`${email}-1`]);
          await inner.query(insert, [`${email}-2`]);
          await inner.query('SELECT 1/0', []);
        });
      // Inside: the savepoint's rows go, the transaction's own stay and commit.
      await c.transaction(async (manager, addOrder) => {
        await addOrder(`${to}-in-kept`);
        await expect(refused(callerTransaction(manager, 'test'), `${to}-in-gone`)).rejects.toThrow(/division by zero/);
        await callerTransaction(manager, 'test').atomically(async (inner) => inner.query(insert, [`${to}-in-nested`]));
        await addOrder(`${to}-in-after`);
      });
      expect(await ordersOf(`${to}-in-gone`)).toBe(0);
      expect(await ordersOf(`${to}-in-`)).toBe(3);
      // Outside: nothing of a failed call stays; a call that succeeds commits.
      const { client, done } = await c.outside();
      try {
        await expect(refused(callerTransaction(client, 'test'), `${to}-out-gone`)).rejects.toThrow(/division by zero/);
        await callerTransaction(client, 'test').atomically(async (inner) => {
          await inner.query(insert, [`${to}-out-kept-1`]);
          await inner.query(insert, [`${to}-out-kept-2`]);
        });
      } finally {
        await done();
      }
      expect(await ordersOf(`${to}-out-gone`)).toBe(0);
      expect(await ordersOf(`${to}-out-kept`)).toBe(2);
    },
  );

  it('an app without TypeORM hands the queue its pg Pool as `connection`: the queue dials as that pool does, on a pool of its own', async () => {
    const appPool = new pg.Pool({ connectionString: url, max: 2, application_name: 'the-app' });
    const other = await startApp(url, { queue: { connection: appPool, workers: false, maintenance: { enabled: false } } });
    try {
      const id = await other.get(QueueService).enqueue('emails', { to: 'pool-settings' });
      await waitFor('the job completed', async () => (await queue.get(id))?.status === 'completed', 10_000);
      expect(appPool.totalCount).toBe(0); // the app's pool was never used
      const names = await db.query<{ name: string }>(`SELECT DISTINCT application_name AS name FROM pg_stat_activity WHERE datname = current_database()`);
      expect(names.rows.map((r) => r.name)).toContain('nestjs-pg-queue api');
    } finally {
      await other.close();
      await appPool.end();
    }
  });

  it('refuses what is not a transaction, naming it, and stores nothing', async () => {
    await expect(queue.enqueue('emails', { to: 'refused-pool' }, { manager: db as never })).rejects.toThrow(/is a pg Pool.*PoolClient on which you ran BEGIN/);
    await expect(queue.enqueue('emails', { to: 'refused-object' }, { manager: { save() {} } as never })).rejects.toThrow(
      /enqueue: manager \(an object of class Object\) is not a transaction the queue can join/,
    );
    expect(await jobsTo('refused-')).toBe(0);
  });
});
