// The worker of flows-processes.spec.ts (and mutations/flows-processes.spec.ts), as its own OS process: a Nest application context whose handlers record
// each run in the `runs` table (job id, process, database time) and return their pid. Jest does not run this file:
// buildWorker compiles it next to a build of the library and the spec forks it. Protocol (IPC): { type: 'loaded' },
// then { type: 'start', url } boots the app and answers { type: 'ready' }; SIGTERM closes it.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { JobHandler, PgQueueModule, type Job } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

let db: pg.Pool;

@Injectable()
class FlowWorkerHandlers {
  @JobHandler('fx-part', { concurrency: 10, prefetch: 20 })
  async part(job: Job<{ n: number }>) {
    await db.query(`INSERT INTO runs (job_id, pid, started_at) VALUES ($1, $2, clock_timestamp())`, [job.id, process.pid]);
    return { n: job.payload.n, pid: process.pid };
  }

  /** A step of a failing flow: fails for good when its payload says so, else completes (and is compensated later). */
  @JobHandler('fx-step', { concurrency: 10, prefetch: 20 })
  async step(job: Job<{ n: number; fail?: boolean }>) {
    await db.query(`INSERT INTO runs (job_id, pid, started_at) VALUES ($1, $2, clock_timestamp())`, [job.id, process.pid]);
    if (job.payload.fail) throw new Error(`step ${job.payload.n} refused`);
    return { n: job.payload.n };
  }

  /** The compensation of a completed fx-step. */
  @JobHandler('fx-undo', { concurrency: 10, prefetch: 20 })
  async undo(job: Job) {
    await db.query(`INSERT INTO runs (job_id, pid, started_at) VALUES ($1, $2, clock_timestamp())`, [job.id, process.pid]);
  }

  @JobHandler('fx-sink', { concurrency: 5 })
  async sink(job: Job) {
    await db.query(`INSERT INTO runs (job_id, pid, started_at) VALUES ($1, $2, clock_timestamp())`, [job.id, process.pid]);
    const parents = await job.parents();
    return { parents: parents.length, sum: parents.reduce((s, p) => s + ((p.result as { n: number } | null)?.n ?? 0), 0) };
  }
}

async function start(url: string): Promise<void> {
  db = new pg.Pool({ connectionString: url, max: 3 });
  @Module({
    imports: [PgQueueModule.forRoot({ connection: url, poolSize: 6, maintenance: { enabled: false }, recurring: { enabled: false } })],
    providers: [FlowWorkerHandlers],
  })
  class FlowWorkerModule {}
  const app = await NestFactory.createApplicationContext(FlowWorkerModule, { logger: ['error'], abortOnError: false });
  await app.init();
  process.once('SIGTERM', () => void app.close().finally(() => db.end()).finally(() => process.exit(0)));
}

serveStart<{ type: string; url: string }>((message) => start(message.url));
