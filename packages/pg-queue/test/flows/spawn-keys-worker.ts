// The worker of flows-spawn-keys-processes.spec.ts, as its own OS process: splitters that spawn children with unique
// keys other processes' splitters spawn too, and children that hold those keys for a few ms. Each run is recorded
// (job id, process) in `fk_runs`. Jest does not run this file: buildWorker compiles it next to a build of the library
// and the spec forks it. Protocol (IPC): { type: 'loaded' }, then { type: 'start', url } boots the app and answers
// { type: 'ready' }; SIGTERM closes it.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { JobHandler, PgQueueError, PgQueueModule, type Job } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

let db: pg.Pool;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

@Injectable()
class SpawnKeyHandlers {
  /** One spawn call per key (a child holding it, and a dependent of that child); a refused call is counted, not fatal. */
  @JobHandler('fk-split', { concurrency: 5, prefetch: 10, maxAttempts: 3 })
  async split(job: Job<{ keys: string[]; holdMs: number }>) {
    await db.query(`INSERT INTO fk_runs (job_id, pid) VALUES ($1, $2)`, [job.id, process.pid]);
    let refused = 0;
    for (const key of job.payload.keys) {
      try {
        await job.spawn([
          { ref: `k-${key}`, queue: 'fk-child', payload: { hold: true }, uniqueKey: key },
          { ref: `after-${key}`, queue: 'fk-child', payload: { hold: false }, dependsOn: [`k-${key}`] },
        ]);
      } catch (error) {
        if (!(error instanceof PgQueueError)) throw error;
        refused++;
      }
    }
    // Between spawn()'s check and the completion: another process's child may take a key meanwhile.
    await sleep(job.payload.holdMs);
    return { refused, pid: process.pid };
  }

  @JobHandler('fk-child', { concurrency: 10, prefetch: 10 })
  async child(job: Job<{ hold: boolean }>) {
    await db.query(`INSERT INTO fk_runs (job_id, pid) VALUES ($1, $2)`, [job.id, process.pid]);
    if (job.payload.hold) await sleep(5 + Math.floor(Math.random() * 20));
    return { pid: process.pid };
  }
}

async function start(url: string): Promise<void> {
  db = new pg.Pool({ connectionString: url, max: 3 });
  @Module({
    imports: [PgQueueModule.forRoot({ connection: url, poolSize: 6, maintenance: { enabled: false }, recurring: { enabled: false } })],
    providers: [SpawnKeyHandlers],
  })
  class SpawnKeyWorkerModule {}
  const app = await NestFactory.createApplicationContext(SpawnKeyWorkerModule, { logger: ['error'], abortOnError: false });
  await app.init();
  process.once('SIGTERM', () => void app.close().finally(() => db.end()).finally(() => process.exit(0)));
}

serveStart<{ type: string; url: string }>((message) => start(message.url));
