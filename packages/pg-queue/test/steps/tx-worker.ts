// The worker of transactional-processes.spec.ts, as its own OS process: a transactional handler that writes one
// ledger row per run through job.manager and tells the parent (IPC) that it is inside its transaction (which), then waits
// `ms`. Its app DataSource is the handlers'; the queue has its own pool. Jest does not run this file: buildWorker
// compiles it and the spec forks it. Protocol (IPC): { type: 'loaded' }, then { type: 'start', url } boots the app
// and answers { type: 'ready' }.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';
import { JobHandler, PgQueueModule, type TransactionalJob } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

@Injectable()
class TxWorkerHandlers {
  @JobHandler('txp-ledger', { transactional: true, concurrency: 4, maxAttempts: 25, backoff: { baseMs: 20, maxMs: 200 } })
  async post(job: TransactionalJob<{ amount: number; ms: number }>) {
    await job.manager.query(`INSERT INTO ledger (job_id, amount, pid, attempt) VALUES ($1, $2, $3, $4)`, [job.id, job.payload.amount, process.pid, job.attempt]);
    // The transaction's backend and start (now() in it is pg_stat_activity's xact_start): the spec waits for it to end.
    const [tx] = await job.manager.query(`SELECT pg_backend_pid() AS backend, now()::text AS xact`);
    process.send?.({ type: 'in-transaction', id: job.id, attempt: job.attempt, backend: tx.backend, xact: tx.xact });
    await new Promise((resolve) => setTimeout(resolve, job.payload.ms));
    return { amount: job.payload.amount };
  }
}

/**
 * Fast transactional jobs read ahead: a fixed buffer of 40, and 'auto' (the default). 'auto' holds what its slots
 * finish in two claim round trips (ReadAhead): at concurrency 2 that was 5-7 jobs here and fewer on a loaded CI
 * machine, under the spec's wait for 5; at 6 slots it holds three times as many.
 */
@Injectable()
class TxBufferedHandlers {
  @JobHandler('txp-fixed', { transactional: true, concurrency: 2, prefetch: 40, maxAttempts: 25 })
  async fixed(job: TransactionalJob<{ amount: number; ms: number }>) {
    return post(job);
  }

  @JobHandler('txp-auto', { transactional: true, concurrency: 6, maxAttempts: 25 })
  async auto(job: TransactionalJob<{ amount: number; ms: number }>) {
    return post(job);
  }
}

async function post(job: TransactionalJob<{ amount: number; ms: number }>) {
  await job.manager.query(`INSERT INTO ledger (job_id, amount, pid, attempt) VALUES ($1, $2, $3, $4)`, [job.id, job.payload.amount, process.pid, job.attempt]);
  await new Promise((resolve) => setTimeout(resolve, job.payload.ms));
  return { amount: job.payload.amount };
}

async function start(url: string): Promise<void> {
  const dataSource = new DataSource({ type: 'postgres', url, extra: { max: 10 } });
  @Module({
    imports: [
      PgQueueModule.forRoot({ dataSource, leaseMs: 1_500, heartbeatMs: 300, maintenance: { sweepIntervalMs: 200 }, recurring: { enabled: false } }),
    ],
    providers: [TxWorkerHandlers, TxBufferedHandlers],
  })
  class TxWorkerModule {}
  const app = await NestFactory.createApplicationContext(TxWorkerModule, { logger: ['error'], abortOnError: false });
  await app.init();
  process.once('SIGTERM', () => void app.close().finally(() => dataSource.destroy()).finally(() => process.exit(0)));
}

serveStart<{ type: string; url: string }>((message) => start(message.url));
