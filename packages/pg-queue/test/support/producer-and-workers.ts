import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from '../faults/support/build-worker.js';
import { forkLoaded, startForked } from './serve-start.js';
import { sqlPool, startApp } from './test-app.js';

/** A database of its own, a producer app in the test's process (no workers, no maintenance) and forked worker processes. */
export interface ProducerAndWorkers {
  readonly url: string;
  readonly db: pg.Pool;
  /** The producer's QueueService. */
  readonly queue: QueueService;
  /** Forks `script` with `env` added and starts it on the database; SIGKILLed after the suite if still running. */
  spawnWorker(env: Record<string, string>): Promise<ChildProcess>;
}

/**
 * The set-up of a crash-and-take-over spec (job-logs-processes, steps-processes): registers beforeAll (the database,
 * `setUp` on it, the producer, the worker build of `workerScript`) and afterAll (every child killed and reaped, then
 * the producer, the pool and the build). Its fields are read inside the tests.
 */
export function useProducerAndWorkers(database: string, workerScript: URL, setUp?: (db: pg.Pool) => Promise<unknown>): ProducerAndWorkers {
  let build: WorkerBuild;
  let producer: INestApplicationContext;
  const children: ChildProcess[] = [];
  const kit = {
    url: '',
    db: undefined as unknown as pg.Pool,
    get queue() {
      return producer.get(QueueService);
    },
    async spawnWorker(env: Record<string, string>) {
      const child = await forkLoaded(build.script, env);
      children.push(child);
      return startForked(child, { url: kit.url });
    },
  };

  beforeAll(async () => {
    kit.url = await createTestDatabase(database);
    producer = await startApp(kit.url, { queue: { workers: false, maintenance: { enabled: false } } });
    kit.db = sqlPool(kit.url);
    await setUp?.(kit.db);
    build = await buildWorker([fileURLToPath(workerScript)]);
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? once(c, 'exit') : undefined)));
    await producer?.close();
    await kit.db?.end();
    await build?.remove();
  });
  return kit;
}
