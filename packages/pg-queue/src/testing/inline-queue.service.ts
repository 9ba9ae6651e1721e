import type { BeforeApplicationShutdown } from '@nestjs/common';
import type { DataSource, EntitySubscriberInterface, QueryRunner } from 'typeorm';
import { QueueService, type EnqueueOptions, type EnqueueResult, type JobSpecs } from '../queue.service.js';
import { queueNameOf, type QueueDefinition } from '../typed/queue-definition.js';
import type { EnqueuedFlow, FlowJobSpecs, FlowSpec } from '../flows/flow.interfaces.js';
import type { QueueTestKit } from './queue-test-kit.js';
import type { TransactionClient } from '../transactions/transaction-client.js';
import { isTypeOrmManager } from '../transactions/clients/typeorm.js';
import { TestingWorkerPool } from './testing-worker-pool.js';

/**
 * QueueService in inline mode: each enqueue stores its job exactly as in production, then, once the row is
 * committed, runs the due jobs of its queue through the kit. Without a transaction that is before the enqueue
 * returns. Inside a TypeORM transaction (`manager` with a transaction open) it is when that transaction
 * commits: a subscriber on the manager's DataSource hears TypeORM's afterTransactionCommit of the outermost
 * transaction (a savepoint's release is not the commit) and runs the queues enqueued in it before the
 * caller's `transaction()` call returns. A rollback runs nothing (the rows are gone with it). Other clients'
 * transactions (pg, Prisma, Kysely, Drizzle, MikroORM) tell nobody of their commit: jobs enqueued in one run at the
 * kit's next drain() (or the next enqueue outside a transaction).
 */
export class InlineQueueService extends QueueService implements BeforeApplicationShutdown {
  /** @internal Set by overrideQueueForTesting. */
  kit!: QueueTestKit;
  /** Queues enqueued in each open transaction, by its query runner. */
  private readonly pending = new WeakMap<QueryRunner, Set<string>>();
  private readonly hooked = new Set<DataSource>();
  private readonly subscriber: EntitySubscriberInterface = {
    afterTransactionCommit: async ({ queryRunner }) => {
      if (queryRunner.isTransactionActive) return; // a savepoint released: the outer transaction is still open
      const queues = this.pending.get(queryRunner);
      if (!queues) return;
      this.pending.delete(queryRunner);
      await this.runInline([...queues]);
    },
    afterTransactionRollback: ({ queryRunner }) => {
      if (!queryRunner.isTransactionActive) this.pending.delete(queryRunner);
    },
  };

  override async enqueue<TPayload>(queue: string | QueueDefinition<TPayload, unknown>, payload: NoInfer<TPayload>, options: EnqueueOptions = {}): Promise<string> {
    const id = await super.enqueue(queue, payload, options);
    await this.runCommitted([queueNameOf(queue)], options.manager);
    return id;
  }

  override async enqueueUnique<TPayload>(queue: string | QueueDefinition<TPayload, unknown>, payload: NoInfer<TPayload>, options: EnqueueOptions & { uniqueKey: string }): Promise<EnqueueResult> {
    const result = await super.enqueueUnique(queue, payload, options);
    await this.runCommitted([queueNameOf(queue)], options.manager);
    return result;
  }

  override async enqueueMany<const T extends readonly unknown[]>(jobs: JobSpecs<T>, options: { manager?: TransactionClient } = {}): Promise<string[]> {
    const ids = await super.enqueueMany(jobs, options);
    await this.runCommitted(jobs.map((j) => queueNameOf(j.queue)), options.manager);
    return ids;
  }

  override async enqueueManyUnique<const T extends readonly unknown[]>(jobs: JobSpecs<T>, options: { manager?: TransactionClient } = {}): Promise<EnqueueResult[]> {
    const results = await super.enqueueManyUnique(jobs, options);
    await this.runCommitted(jobs.map((j) => queueNameOf(j.queue)), options.manager);
    return results;
  }

  /** Runs the whole flow (its dependents as they unblock, its compensations if it fails) once it is committed. */
  override async enqueueFlow<const T extends readonly unknown[]>(
    typedSpec: { name?: string; jobs: FlowJobSpecs<T> },
    options: { manager?: TransactionClient } = {},
  ): Promise<EnqueuedFlow> {
    const flow = await super.enqueueFlow(typedSpec, options);
    const spec = typedSpec as unknown as FlowSpec;
    const queues = spec.jobs.flatMap((j) => [queueNameOf(j.queue), ...(j.compensate ? [queueNameOf(j.compensate.queue)] : [])]);
    await this.runCommitted(queues, options.manager);
    return flow;
  }

  /** At app close (Nest calls it): the subscriber leaves the DataSources it was added to. */
  beforeApplicationShutdown(): void {
    for (const dataSource of this.hooked) {
      const at = dataSource.subscribers.indexOf(this.subscriber);
      if (at >= 0) dataSource.subscribers.splice(at, 1);
    }
    this.hooked.clear();
  }

  /** Runs the queues' due jobs, each with the kit of its queue's database (an app with several has one kit per database). */
  private async runInline(queues: string[]): Promise<void> {
    if (!this.databases?.several) return this.kit.runInline(queues);
    const byKit = new Map<QueueTestKit, string[]>();
    for (const queue of queues) {
      const { workers } = this.databases.ownerOf(queue);
      const kit = workers instanceof TestingWorkerPool ? workers.kit : this.kit;
      byKit.set(kit, [...(byKit.get(kit) ?? []), queue]);
    }
    for (const [kit, owned] of byKit) await kit.runInline(owned);
  }

  private async runCommitted(queues: string[], manager: TransactionClient | undefined): Promise<void> {
    const client = this.clientOf(manager);
    if (client === undefined) return this.runInline(queues);
    const runner = isTypeOrmManager(client) ? client.queryRunner : undefined;
    if (!runner?.isTransactionActive) return this.runInline(queues);
    const dataSource = runner.dataSource;
    if (!this.hooked.has(dataSource)) {
      dataSource.subscribers.push(this.subscriber);
      this.hooked.add(dataSource);
    }
    const pending = this.pending.get(runner) ?? new Set<string>();
    for (const queue of queues) pending.add(queue);
    this.pending.set(runner, pending);
  }
}
