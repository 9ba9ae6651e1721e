import { Inject, Injectable, Scope } from '@nestjs/common';
import { REQUEST } from '@nestjs/core';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { JobHandlerRegistry } from '../src/discovery/job-handler.registry.js';
import { useTestApp, waitFor } from './support/test-app.js';

let made = 0;
const runs: { jobId: string; requestJobId: string; handler: number; context: number; contextJobId: string }[] = [];

/** A request-scoped service: one per attempt, with the Job as its REQUEST. */
@Injectable({ scope: Scope.REQUEST })
class JobContext {
  readonly serial = ++made;
  constructor(@Inject(REQUEST) readonly job: Job) {}
}

@Injectable({ scope: Scope.REQUEST })
class PerJobHandler {
  readonly serial = ++made;
  constructor(
    private readonly context: JobContext,
    @Inject(REQUEST) private readonly request: Job,
  ) {}

  @JobHandler('rs-per-job', { concurrency: 4 })
  async handle(job: Job) {
    await new Promise((r) => setTimeout(r, 5));
    runs.push({ jobId: job.id, requestJobId: this.request.id, handler: this.serial, context: this.context.serial, contextJobId: this.context.job.id });
    return { handler: this.serial };
  }
}

/** A default-scoped provider that injects a request-scoped service: request-scoped too, by Nest's rules. */
@Injectable()
class ImplicitlyScoped {
  constructor(private readonly context: JobContext) {}

  @JobHandler('rs-implicit')
  async handle(job: Job) {
    return { sameJob: this.context.job.id === job.id };
  }
}

@Injectable()
class Singleton {
  @JobHandler('rs-singleton')
  async handle() {
    return undefined;
  }
}

describe('handlers on request-scoped providers: a DI context per attempt', () => {
  const t = useTestApp('requestscoped', { providers: [JobContext, PerJobHandler, ImplicitlyScoped, Singleton], queue: { maintenance: { enabled: false } } });
  const status = async (id: string) => (await t.db.query(`SELECT status, result FROM background_jobs WHERE id = $1`, [id])).rows[0];

  it('each attempt gets fresh instances of the provider and of what it injects, with the Job as REQUEST', async () => {
    const queue = t.app.get(QueueService);
    const ids = await queue.enqueueMany(Array.from({ length: 12 }, () => ({ queue: 'rs-per-job', payload: {} })));
    const implicit = await queue.enqueue('rs-implicit', {});
    await waitFor('all completed', async () => (await Promise.all([...ids, implicit].map(status))).every((r) => r?.status === 'completed'));
    expect(runs.map((r) => r.jobId).sort()).toEqual([...ids].sort());
    for (const r of runs) {
      expect(r.requestJobId).toBe(r.jobId);
      expect(r.contextJobId).toBe(r.jobId);
    }
    // 12 attempts, 12 handlers and 12 contexts, none shared.
    expect(new Set(runs.map((r) => r.handler)).size).toBe(12);
    expect(new Set(runs.map((r) => r.context)).size).toBe(12);
    expect(new Set([...runs.map((r) => r.handler), ...runs.map((r) => r.context)]).size).toBe(24);
    for (const id of ids) expect((await status(id)).result).toEqual({ handler: runs.find((r) => r.jobId === id)!.handler });
    expect((await status(implicit)).result).toEqual({ sameJob: true });
  });

  it('singleton handlers keep the direct call; request-scoped ones resolve per attempt (the cost is logged)', async () => {
    const registry = t.app.get(JobHandlerRegistry, { strict: false });
    const perJob = registry.get('rs-per-job')!;
    const singleton = registry.get('rs-singleton')!;
    expect(singleton.perAttempt).toBe(false);
    expect(perJob.perAttempt).toBe(true);
    // The handles alone, without the database: what the DI context adds to each job.
    const signal = new AbortController().signal;
    const job = (id: number) => ({ id: String(id), queue: 'q', payload: {}, attempt: 1, maxAttempts: 1, priority: 0, runAt: new Date(0), createdAt: new Date(0), signal, progress() {} });
    const time = async (handle: (job: never) => unknown, n: number) => {
      const started = performance.now();
      for (let i = 0; i < n; i++) await handle(job(i) as never);
      return ((performance.now() - started) * 1000) / n;
    };
    const implicitHandle = registry.get('rs-implicit')!.handle;
    await time(singleton.handle, 2_000);
    await time(implicitHandle, 2_000); // warm-up
    const direct = await time(singleton.handle, 20_000);
    const resolved = await time(implicitHandle, 20_000);
    // Logged, not asserted: speed targets live in the benchmark, never in a timed unit test (a 1 ms bound here
    // failed a clean-clone CI pass at 1,004 µs on a loaded machine). The flags above are what this test asserts.
    console.log(`handler call: singleton ${direct.toFixed(2)} µs/job, request-scoped (context + resolve of 2 providers) ${resolved.toFixed(2)} µs/job`);
  });
});
