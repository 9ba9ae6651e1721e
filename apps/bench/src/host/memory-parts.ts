/**
 * Child-process entry of the memory scenario (scenarios/memory.ts), for nestjs-pg-queue only: what a worker process's
 * heap is made of, measured in one process step by step, each step's heap taken after two full GCs (the child runs
 * with --expose-gc). The libraries are imported one by one (Nest, then TypeORM and pg, then nestjs-pg-queue), then
 * an empty Nest application context is made (Nest's own), a TypeORM DataSource initialized on the database (what an
 * app using TypeORM holds anyway), and last PgQueueModule booted with the benchmark's handler and workers. Each step's
 * figure is the heap's growth over the step before. Sends the steps over IPC and exits.
 */
import 'reflect-metadata';
import { QUEUE } from '../adapters/types.js';
import { memoryAfterGc } from './memory.js';
import type { MemoryPart } from './protocol.js';

async function measure(url: string, concurrency: number): Promise<MemoryPart[]> {
  const parts: MemoryPart[] = [];
  const step = async (name: MemoryPart['step']) => parts.push({ step: name, after: await memoryAfterGc() });
  await step('Node');
  const [{ Injectable, Module }, { NestFactory }] = await Promise.all([import('@nestjs/common'), import('@nestjs/core')]);
  await step('@nestjs/core and @nestjs/common loaded');
  const [{ DataSource }] = await Promise.all([import('typeorm'), import('pg')]);
  await step('typeorm and pg loaded');
  const { JobHandler, PgQueueModule } = await import('nestjs-pg-queue');
  await step('nestjs-pg-queue loaded (with what it imports beyond those)');
  class EmptyModule {}
  Module({})(EmptyModule);
  const empty = await NestFactory.createApplicationContext(EmptyModule, { logger: false });
  await step('an empty Nest application context');
  const dataSource = await new DataSource({ type: 'postgres', url }).initialize();
  await step('a TypeORM DataSource, initialized');
  class Handler {
    async handle(): Promise<void> {}
  }
  JobHandler(QUEUE)(Handler.prototype, 'handle', Object.getOwnPropertyDescriptor(Handler.prototype, 'handle')!);
  Injectable()(Handler);
  class QueueModule {}
  Module({
    imports: [PgQueueModule.forRoot({ connection: { url, poolSize: 4 }, queues: { [QUEUE]: { concurrency, prefetch: 500 - concurrency, batchSize: 500 } } })],
    providers: [Handler],
  })(QueueModule);
  const queue = await NestFactory.createApplicationContext(QueueModule, { logger: ['error'] });
  await queue.init();
  // The workers' first claim, LISTEN and instance registration are done within a second of boot.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  await step('PgQueueModule with workers, booted');
  await queue.close();
  await dataSource.destroy();
  await empty.close();
  return parts;
}

process.once('message', (message: { url: string; concurrency: number }) => {
  measure(message.url, message.concurrency).then(
    (parts) => process.send!({ ok: true, parts }, () => process.exit(0)),
    (error: unknown) => process.send!({ ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }, () => process.exit(1)),
  );
});
