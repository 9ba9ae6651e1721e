// The app of ambient-transactions.spec.ts, as its own OS process: @nestjs-cls/transactional is CommonJS and
// requires the ESM-only Nest 12 packages, which Node 20.19+ allows and Jest's module system does not. Jest does
// not run this file: buildWorker compiles it (and the generated Prisma client) next to a build of the library and
// the spec forks it. Protocol (IPC): { type: 'loaded' }, then { type: 'start', url, adapter } boots an app whose
// enqueues join the surrounding @Transactional() call (adapter 'typeorm' or 'prisma'; 'none' boots without the
// plugin; `testing: 'inline'` builds it under the testing kit's inline mode) and answers { type: 'ready' }, or
// { type: 'boot-error', message } before it exits; then each
// { type: 'call', id, method, email } answers { type: 'answer', id, value } or { type: 'answer', id, error }.
import 'reflect-metadata';
import { Inject, Injectable, Module, type DynamicModule, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ClsModule } from 'nestjs-cls';
import { ClsPluginTransactional, getTransactionHostToken, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { TransactionalAdapterPrisma } from '@nestjs-cls/transactional-adapter-prisma';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { JobHandler, PgQueueModule, QueueService } from '../../src/index.js';
import { overrideQueueForTesting } from '../../src/testing/index.js';
import { serveStart } from '../support/serve-start.js';

type Adapter = 'typeorm' | 'prisma' | 'none';

interface PrismaLike {
  order: { create(args: { data: { email: string } }): Promise<unknown> };
  $disconnect(): Promise<void>;
}

@Injectable()
class Mailer {
  @JobHandler('emails')
  async send() {}
}

/** The app's code: it writes its row through the adapter's transaction and enqueues with no `manager`. */
function checkoutFor(adapter: Adapter, url: string): Type {
  const outside = new pg.Pool({ connectionString: url, max: 1 });
  const visibleOutside = async (id: string) => (await outside.query<{ n: number }>('SELECT count(*)::int AS n FROM background_jobs WHERE id = $1', [id])).rows[0].n === 1;

  @Injectable()
  class Checkout {
    constructor(
      private readonly queue: QueueService,
      @Inject(getTransactionHostToken(adapter === 'prisma' ? 'prisma' : undefined)) private readonly txHost: TransactionHost,
    ) {}

    private async addOrder(email: string): Promise<void> {
      const tx = this.txHost.tx as unknown;
      if (adapter === 'prisma') await (tx as PrismaLike).order.create({ data: { email } });
      else await (tx as { query(sql: string, values: unknown[]): Promise<unknown> }).query('INSERT INTO orders (email) VALUES ($1)', [email]);
    }

    /** The order and its email in one transaction; `fail` throws after both, which rolls both back. */
    @Transactional(adapter === 'prisma' ? 'prisma' : undefined)
    async placeOrder(email: string, fail = false): Promise<{ id: string; visibleOutside: boolean }> {
      await this.addOrder(email);
      const id = await this.queue.enqueue('emails', { to: email });
      const result = { id, visibleOutside: await visibleOutside(id) };
      if (fail) throw new Error('payment declined');
      return result;
    }

    /** enqueueMany, enqueueUnique and a flow in one @Transactional() call. */
    @Transactional(adapter === 'prisma' ? 'prisma' : undefined)
    async placeBig(email: string, fail = false): Promise<void> {
      await this.addOrder(email);
      await this.queue.enqueueMany([{ queue: 'emails', payload: { to: `${email}-many` } }]);
      await this.queue.enqueueUnique('emails', { to: `${email}-unique` }, { uniqueKey: email });
      await this.queue.enqueueFlow({ jobs: [{ ref: 'a', queue: 'emails', payload: { to: `${email}-flow-a` } }, { ref: 'b', queue: 'emails', payload: { to: `${email}-flow-b` }, dependsOn: ['a'] }] });
      if (fail) throw new Error('payment declined');
    }

    /** No @Transactional(): the enqueue autocommits, as without the option. */
    async enqueueAlone(email: string): Promise<{ id: string; visibleOutside: boolean }> {
      const id = await this.queue.enqueue('emails', { to: email });
      return { id, visibleOutside: await visibleOutside(id) };
    }
  }
  return Checkout;
}

async function prismaModule(url: string): Promise<{ module: DynamicModule; token: Type }> {
  const clientPath = process.env.PG_QUEUE_PRISMA_CLIENT!;
  const { PrismaClient } = (await import(clientPath)) as { PrismaClient: new (options: { adapter: unknown }) => PrismaLike };
  @Injectable()
  class PrismaService extends (PrismaClient as unknown as new (options: { adapter: unknown }) => PrismaLike) {
    constructor() {
      super({ adapter: new PrismaPg({ connectionString: url }) });
    }
  }
  @Module({ providers: [PrismaService], exports: [PrismaService] })
  class PrismaModule {}
  return { module: { module: PrismaModule }, token: PrismaService };
}

async function start(url: string, adapter: Adapter, testing?: 'inline'): Promise<void> {
  const plugins = [];
  if (adapter === 'typeorm') {
    plugins.push(new ClsPluginTransactional({ imports: [TypeOrmModule], adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource }) }));
  } else if (adapter === 'prisma') {
    const prisma = await prismaModule(url);
    plugins.push(new ClsPluginTransactional({ connectionName: 'prisma', imports: [prisma.module], adapter: new TransactionalAdapterPrisma({ prismaInjectionToken: prisma.token }) }));
  }
  const Checkout = checkoutFor(adapter, url);
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url }),
      ClsModule.forRoot({ global: true, plugins }),
      PgQueueModule.forRoot({
        connection: url,
        ambientTransactions: adapter === 'prisma' ? { connectionName: 'prisma' } : true,
        // A minute between safety polls: a job that runs at once was woken by the commit.
        pollIntervalMs: 60_000,
        maintenance: { enabled: false },
        recurring: { enabled: false },
      }),
    ],
    // Without the plugin, only what the queue itself needs: its own boot check is what is tested.
    providers: adapter === 'none' ? [Mailer] : [Mailer, Checkout],
  })
  class AmbientAppModule {}
  let app: INestApplicationContext;
  try {
    if (testing === 'inline') {
      // The same app under the testing kit, inline: no worker loops, each committed enqueue runs its jobs at once.
      const moduleRef = await overrideQueueForTesting(Test.createTestingModule({ imports: [AmbientAppModule] }), { mode: 'inline' }).compile();
      moduleRef.useLogger(false);
      app = await moduleRef.init();
    } else {
      app = await NestFactory.createApplicationContext(AmbientAppModule, { logger: false, abortOnError: false });
      await app.init();
    }
  } catch (error) {
    process.send?.({ type: 'boot-error', message: error instanceof Error ? error.message : String(error) });
    throw error;
  }
  const checkout = app.get(Checkout) as Record<string, (email: string, fail?: boolean) => Promise<unknown>>;
  process.on('message', (m: { type: string; id: number; method: string; email: string; fail?: boolean }) => {
    if (m.type !== 'call') return;
    checkout[m.method](m.email, m.fail).then(
      (value) => process.send?.({ type: 'answer', id: m.id, value }),
      (error: unknown) => process.send?.({ type: 'answer', id: m.id, error: error instanceof Error ? error.message : String(error) }),
    );
  });
  process.once('SIGTERM', () => void app.close().finally(() => process.exit(0)));
}

serveStart<{ type: string; url: string; adapter: Adapter; testing?: 'inline' }>((message) => start(message.url, message.adapter, message.testing));
