// The app of eager-context-cls.spec.ts, as its own OS process (nestjs-cls and @nestjs-cls/transactional are CommonJS
// and require the ESM-only Nest 12 packages, which Jest's module system does not allow: see ambient-app.ts). An app
// with nestjs-cls, @nestjs-cls/transactional's TypeORM adapter and PgQueueModule without ambientTransactions: an
// enqueue inside a @Transactional() call autocommits, and with a free slot its job starts eagerly, during the call.
// Protocol (IPC): { type: 'loaded' }, then { type: 'start', url } boots and answers { type: 'ready' }; each
// { type: 'call', id, email, fail } runs Checkout.place in a request's CLS context and answers
// { type: 'answer', id, value } or { type: 'answer', id, error }.
import 'reflect-metadata';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ClsModule, ClsService } from 'nestjs-cls';
import { ClsPluginTransactional, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { DataSource, type EntityManager } from 'typeorm';
import { JobHandler, PgQueueModule, QueueService, type Job } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

/** Resolved by the handler once its write is made: the request waits for it before it ends (commits or rolls back). */
const written = new Map<string, () => void>();

@Injectable()
class Auditor {
  constructor(
    private readonly txHost: TransactionHost,
    private readonly cls: ClsService,
  ) {}

  /** Writes its row through txHost.tx, as app code does, with what it saw of the CLS context. */
  @JobHandler('eager-audit', { concurrency: 2 })
  async audit(job: Job<{ email: string }>) {
    const active = this.cls.isActive();
    const user = active ? (this.cls.get<string>('user') ?? null) : null;
    if (active) this.cls.set('user', `changed by job ${job.id}`);
    await (this.txHost.tx as EntityManager).query(`INSERT INTO eager_audit (job_id, email, cls_active, cls_user) VALUES ($1, $2, $3, $4)`, [job.id, job.payload.email, active, user]);
    written.get(job.payload.email)?.();
  }
}

@Injectable()
class Checkout {
  constructor(
    private readonly queue: QueueService,
    private readonly txHost: TransactionHost,
    private readonly cls: ClsService,
  ) {}

  /** A request: its CLS store (user alice), then the transactional call; answers with what the store holds after it. */
  async request(email: string, fail: boolean): Promise<{ id?: string; user: string; error?: string }> {
    return this.cls.run(async () => {
      this.cls.set('user', 'alice');
      const out: { id?: string; user: string; error?: string } = { user: '' };
      try {
        out.id = await this.place(email, fail, (id) => (out.id = id));
      } catch (error) {
        out.error = error instanceof Error ? error.message : String(error);
      }
      out.user = this.cls.get<string>('user');
      return out;
    });
  }

  /** The order row and the job's enqueue in one @Transactional() call; waits until the job's handler has written. */
  @Transactional()
  async place(email: string, fail: boolean, enqueued: (id: string) => void): Promise<string> {
    await (this.txHost.tx as EntityManager).query('INSERT INTO eager_orders (email) VALUES ($1)', [email]);
    const handlerWrote = new Promise<void>((resolve) => written.set(email, resolve));
    const id = await this.queue.enqueue('eager-audit', { email });
    enqueued(id);
    await Promise.race([handlerWrote, new Promise((resolve) => setTimeout(resolve, 5_000))]);
    if (fail) throw new Error('payment declined');
    return id;
  }
}

async function start(url: string): Promise<void> {
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url, extra: { max: 4 } }),
      ClsModule.forRoot({ global: true, plugins: [new ClsPluginTransactional({ imports: [TypeOrmModule], adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource }) })] }),
      // ambientTransactions off (the default): an enqueue without `manager` autocommits, and may start eagerly.
      PgQueueModule.forRoot({ connection: url, workerId: 'eager-cls', pollIntervalMs: 60_000, maintenance: { enabled: false }, recurring: { enabled: false } }),
    ],
    providers: [Auditor, Checkout],
  })
  class EagerClsAppModule {}
  const app: INestApplicationContext = await NestFactory.createApplicationContext(EagerClsAppModule, { logger: false, abortOnError: false });
  await app.init();
  const checkout = app.get(Checkout);
  process.on('message', (m: { type: string; id: number; email: string; fail: boolean }) => {
    if (m.type !== 'call') return;
    checkout.request(m.email, m.fail).then(
      (value) => process.send?.({ type: 'answer', id: m.id, value }),
      (error: unknown) => process.send?.({ type: 'answer', id: m.id, error: error instanceof Error ? error.message : String(error) }),
    );
  });
  process.once('SIGTERM', () => void app.close().finally(() => process.exit(0)));
}

serveStart<{ type: string; url: string }>((message) => start(message.url));
