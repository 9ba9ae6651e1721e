// The worker of steps-processes.spec.ts, as its own OS process. Its handler charges, then ships, each in a durable
// step whose function writes a row of `effects` (job id, step, process); with HOLD=1 in its environment it stops
// between the two steps (the spec SIGKILLs it there). Jest does not run this file: buildWorker compiles it next to a
// build of the library and the spec forks it. Protocol (IPC): { type: 'loaded' }, then { type: 'start', url } boots
// the app and answers { type: 'ready' }.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { JobHandler, PgQueueModule, type Job } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

let db: pg.Pool;

@Injectable()
class StepWorkerHandlers {
  @JobHandler('sx-order', { concurrency: 4, prefetch: 4, backoff: { baseMs: 0, jitter: false } })
  async order(job: Job<{ order: number }>) {
    const effect = (step: string) => db.query(`INSERT INTO effects (job_id, step, pid) VALUES ($1, $2, $3)`, [job.id, step, process.pid]);
    const charge = await job.step('charge', async () => {
      await effect('charge');
      return { chargeId: `ch_${job.payload.order}`, pid: process.pid };
    });
    if (process.env.HOLD === '1') {
      await effect('between');
      await new Promise(() => undefined); // killed here
    }
    const shipment = await job.step('ship', async () => {
      await effect('ship');
      return { shipment: `sh_${job.payload.order}` };
    });
    return { charge, shipment };
  }
}

async function start(url: string): Promise<void> {
  db = new pg.Pool({ connectionString: url, max: 3 });
  @Module({
    imports: [
      PgQueueModule.forRoot({ connection: url, poolSize: 4, leaseMs: 2_000, heartbeatMs: 500, maintenance: { sweepIntervalMs: 200 }, recurring: { enabled: false } }),
    ],
    providers: [StepWorkerHandlers],
  })
  class StepWorkerModule {}
  const app = await NestFactory.createApplicationContext(StepWorkerModule, { logger: ['error'], abortOnError: false });
  await app.init();
  process.once('SIGTERM', () => void app.close().finally(() => db.end()).finally(() => process.exit(0)));
}

serveStart<{ type: string; url: string }>((message) => start(message.url));
