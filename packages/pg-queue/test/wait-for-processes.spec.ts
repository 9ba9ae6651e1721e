import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { JobFailedError, QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './faults/support/build-worker.js';
import { startApp, waitFor } from './support/test-app.js';

// waitFor across OS processes: this process only enqueues and waits (workers: false); a forked process runs
// the handlers. The finish notice and the result travel through the database alone.
describe('waitFor across processes', () => {
  let build: WorkerBuild;
  let child: ChildProcess;
  let producer: INestApplicationContext;

  beforeAll(async () => {
    const url = await createTestDatabase('waitfor-processes');
    producer = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    build = await buildWorker([fileURLToPath(new URL('./waiting/result-worker.ts', import.meta.url))]);
    child = fork(build.script, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    const ready = new Promise<void>((resolve, reject) => {
      child.on('message', (m: { type: string }) => {
        if (m.type === 'loaded') child.send({ type: 'start', url });
        if (m.type === 'ready') resolve();
      });
      child.once('exit', (code) => reject(new Error(`worker exited with ${code} before it was ready`)));
    });
    await ready;
  });
  afterAll(async () => {
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
    await producer?.close();
    await build?.remove();
  });

  it("resolves with the result another process's handler returned; progress was visible while it ran", async () => {
    const queue = producer.get(QueueService);
    const id = await queue.enqueue('xp-report', { steps: 10 });
    const waiting = queue.waitFor<{ pid: number; steps: number }>(id, { timeoutMs: 30_000 });
    const seen = await waitFor('progress from the other process', async () => {
      const job = await queue.get(id);
      return job?.status === 'processing' && typeof job.progress === 'number' && job.progress;
    });
    expect(seen).toBeGreaterThanOrEqual(1);
    const result = await waiting;
    expect(result).toEqual({ pid: child.pid, steps: 10 });
    expect(result!.pid).not.toBe(process.pid);
    expect((await queue.get(id))?.progress).toBe(10);
  });

  it('rejects with the error thrown in the other process', async () => {
    const queue = producer.get(QueueService);
    const id = await queue.enqueue('xp-fail', {}, { maxAttempts: 1 });
    const error = await queue.waitFor(id, { timeoutMs: 30_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    expect((error as JobFailedError).lastError).toContain(`refused in process ${child.pid}`);
  });
});
