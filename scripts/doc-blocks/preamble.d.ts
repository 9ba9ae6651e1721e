// Shared preamble of the documentation's TypeScript blocks (scripts/check-docs.mjs): the names blocks use
// without importing or defining them. A global script, so a block's own import or declaration of a name
// shadows the one here. Library names are the real types; the example app's names are declared loosely.

// Libraries the examples use.
declare const Injectable: typeof import('@nestjs/common').Injectable;
declare const Module: typeof import('@nestjs/common').Module;
declare const Controller: typeof import('@nestjs/common').Controller;
declare const Post: typeof import('@nestjs/common').Post;
declare const Body: typeof import('@nestjs/common').Body;
declare const Logger: typeof import('@nestjs/common').Logger;
type Logger = import('@nestjs/common').Logger;
declare const NestFactory: typeof import('@nestjs/core').NestFactory;
declare const TypeOrmModule: typeof import('@nestjs/typeorm').TypeOrmModule;
declare const Test: typeof import('@nestjs/testing').Test;
declare const DataSource: typeof import('typeorm').DataSource;
type DataSource = import('typeorm').DataSource;
type EntityManager = import('typeorm').EntityManager;
declare const PgQueueModule: typeof import('nestjs-pg-queue').PgQueueModule;
declare const QueueService: typeof import('nestjs-pg-queue').QueueService;
type QueueService = import('nestjs-pg-queue').QueueService;
declare const JobHandler: typeof import('nestjs-pg-queue').JobHandler;
declare const RecurringJob: typeof import('nestjs-pg-queue').RecurringJob;
declare const JobSnoozedError: typeof import('nestjs-pg-queue').JobSnoozedError;
declare const RateLimitedError: typeof import('nestjs-pg-queue').RateLimitedError;
declare const PG_QUEUE_MIGRATIONS: typeof import('nestjs-pg-queue').PG_QUEUE_MIGRATIONS;
type Job<T = unknown> = import('nestjs-pg-queue').Job<T>;
type RecurringJobPayload<T extends object = Record<string, never>> = import('nestjs-pg-queue').RecurringJobPayload<T>;

// The example app: its entities, services and outside world.
declare class Order {
  id: number;
  email: string;
  item: string;
  amount: number;
}
declare class OrdersService {
  place(order: Partial<Order>): Promise<void>;
}
declare class Mailer {
  send(job: Job<{ to: string }>): Promise<void>;
}
declare class AppModule {}
// The quick start's handler (docs/quick-start.md) and the files of a `nest new` project.
declare class Greeter {
  greetLater(name: string): Promise<string>;
  greet(job: Job<{ name: string }>): Promise<string>;
}
declare class AppController {}
declare class AppService {}
declare const stripe: { charge(orderId: number, amount: number): Promise<string>; refund(chargeId: string): Promise<void> };
declare const smtp: { send(to: string, options?: { signal?: AbortSignal }): Promise<void> };
declare const order: Order;
declare const mailer: Mailer;
/** An injected QueueService (blocks written as if inside a class or a script). */
declare const queue: QueueService;
declare const dataSource: DataSource;
declare const app: import('@nestjs/common').INestApplication;

// Durable steps and transactional handlers (docs/guides/durable-steps.md, transactional-handlers.md).
type TransactionalJob<T = unknown> = import('nestjs-pg-queue').TransactionalJob<T>;
declare const payments: { charge(orderId: string): Promise<{ id: string }> };
declare const courier: { ship(orderId: string, chargeId: string): Promise<{ tracking: string }> };
declare const notifier: { shipped(orderId: string, tracking: string): Promise<void> };
declare const bank: { requestPayout(orderId: string): Promise<{ id: string }>; payoutStatus(orderId: string): Promise<'pending' | 'settled'> };
declare class LedgerEntry {
  id: number;
  accountId: string;
  cents: number;
  jobId: string;
}
declare class Account {
  id: string;
  balanceCents: number;
}
// Batch handlers (docs/guides/batch-handlers.md).
type BatchJob<T = unknown> = import('nestjs-pg-queue').BatchJob<T>;
declare const defineQueue: typeof import('nestjs-pg-queue').defineQueue;
declare const search: { bulkIndex(docIds: string[]): Promise<{ items: { error?: string }[] }> };
