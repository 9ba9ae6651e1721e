// A process of wake-ups-processes.spec.ts: a Nest application context that is either a worker (handlers that
// record each start in wake_runs, polling set to a minute so that only NOTIFY wakes them) or a producer
// (workers: false) that enqueues through QueueService with N concurrent callers when told. Jest does not run
// this file: buildWorker compiles it next to a build of the library and the spec forks it. Protocol (IPC):
// { type: 'loaded' }, { type: 'start', url, role } boots the app and answers { type: 'ready' }; then a
// producer takes { type: 'enqueue', jobs, callers } and answers { type: 'enqueued', ids }; SIGTERM closes it.
import 'reflect-metadata';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { JobHandler, PgQueueModule, QueueService, type Job } from '../../src/index.js';
import { serveStart } from '../support/serve-start.js';

let runs: pg.Pool;

@Injectable()
class WakeHandlers {
  @JobHandler('wake-xp', { concurrency: 8 })
  async handle(job: Job) {
    await runs.query(`INSERT INTO wake_runs (job_id, pid) VALUES ($1, $2)`, [job.id, process.pid]);
  }
}

type Start = { type: string; url: string; role: 'worker' | 'producer' };

async function start({ url, role }: Start): Promise<void> {
  const worker = role === 'worker';
  @Module({
    imports: [
      PgQueueModule.forRoot({
        connection: url,
        poolSize: 16,
        workers: worker,
        pollIntervalMs: 60_000,
        fallbackPollIntervalMs: 60_000,
        maintenance: { enabled: false },
        recurring: { enabled: false },
      }),
    ],
    providers: worker ? [WakeHandlers] : [],
  })
  class WakeProcessModule {}
  runs = new pg.Pool({ connectionString: url, max: 4 });
  const app: INestApplicationContext = await NestFactory.createApplicationContext(WakeProcessModule, { logger: ['error', 'warn'], abortOnError: false });
  await app.init();
  if (!worker) {
    const queue = app.get(QueueService);
    process.on('message', (message: { type: string; jobs: number; callers: number }) => {
      if (message.type !== 'enqueue') return;
      const per = Math.ceil(message.jobs / message.callers);
      void Promise.all(
        Array.from({ length: message.callers }, async (_, caller) => {
          const ids: string[] = [];
          for (let i = 0; i < per; i++) ids.push(await queue.enqueue('wake-xp', { caller, i }));
          return ids;
        }),
      ).then(
        (ids) => process.send?.({ type: 'enqueued', ids: ids.flat() }),
        (error: unknown) => process.send?.({ type: 'enqueued', error: String(error) }),
      );
    });
  }
  process.once('SIGTERM', () => void app.close().then(() => runs.end()).finally(() => process.exit(0)));
}

serveStart<Start>(start);
