import { PgBoss } from 'pg-boss';
import { flowPlan, type FlowPayload, type FlowResult } from './flow-shapes.js';
import { QUEUE, work, type Adapter, type AdapterOptions, type BenchPayload, type RunningSystem } from './types.js';

/**
 * How pg-boss 12 runs `concurrency` jobs at once. A pg-boss worker fetches `batchSize` jobs, hands the
 * whole batch to one handler call and completes it in one statement; `localConcurrency` runs that many
 * such loops side by side. Jobs in flight = localConcurrency x batchSize, held equal to the concurrency
 * the other systems get. Among the splits that keep that product, one loop per 25 jobs was the fastest
 * here on 20,000 no-op jobs (c=10: 1x10 721/s vs 2x5 464/s; c=50: 2x25 2,790/s vs 1x50 1,973/s vs 5x10
 * 952/s): larger batches mean fewer round trips, a second loop overlaps one loop's fetch with the
 * other's completion.
 */
export function pgBossShape(concurrency: number): { localConcurrency: number; batchSize: number } {
  const override = process.env.BENCH_PGBOSS_SHAPE; // "loops x batch", for re-tuning only
  if (override) {
    const [loops, batch] = override.split('x').map(Number);
    return { localConcurrency: loops, batchSize: batch };
  }
  const localConcurrency = Math.max(1, Math.round(concurrency / 25));
  return { localConcurrency, batchSize: Math.max(1, Math.floor(concurrency / localConcurrency)) };
}

/**
 * pg-boss with its fastest documented settings for this workload: LISTEN/NOTIFY on (`useListenNotify`
 * plus the queue's `notify`), burst fetching while batches come back full (`burstWhenBatchFull`), batch
 * fetch and batch completion. Its maintenance (`supervise`: expiry of stuck jobs, retention) stays on as
 * ours does; only cron (`schedule`), a feature the others do not have, is off.
 */
export const pgBossAdapter: Adapter = {
  async start(options: AdapterOptions): Promise<RunningSystem> {
    const flows = options.onFlowJobEnd;
    const boss = new PgBoss({
      connectionString: options.url,
      max: options.poolSize,
      useListenNotify: options.role === 'worker',
      schedule: false,
      application_name: `bench pg-boss ${options.role}`,
      // Flows: pg-boss 12 does not unblock a dependent when its parent completes (completion stays a join-free
      // statement); its background resolver does, once per flowIntervalSeconds across the cluster (default 5 s).
      // The flows scenario gets the documented minimum, 1 s; the other scenarios keep the default.
      ...(flows ? { flowIntervalSeconds: 1 } : {}),
    });
    boss.on('error', (error: Error) => console.error(`[pg-boss] ${error.message}`));
    await boss.start();
    if (!(await boss.getQueue(QUEUE))) await boss.createQueue(QUEUE, { notify: true });
    if (options.role === 'worker' && flows) {
      await workFlows(boss, options.concurrency, options.onJob, flows);
    } else if (options.role === 'worker' && options.mode?.batch) {
      // The modes scenario's batch cell: one loop handed mode.batch jobs per call, completed in one statement.
      await boss.work<BenchPayload>(QUEUE, { localConcurrency: options.concurrency, batchSize: options.mode.batch, burstWhenBatchFull: true }, async (jobs) => {
        for (const job of jobs) options.onJob(job.data);
      });
    } else if (options.role === 'worker') {
      const shape = pgBossShape(options.concurrency);
      await boss.work<BenchPayload>(
        QUEUE,
        { ...shape, burstWhenBatchFull: shape.batchSize > 1 },
        async (jobs) => {
          for (const job of jobs) options.onJob(job.data);
          // A batch's jobs work side by side: loops x batch jobs at once, the concurrency the others get.
          await work(options.jobMs);
        },
      );
    }
    return {
      enqueue: async (payload) => void (await boss.send(QUEUE, payload as object)),
      enqueueMany: async (payloads) => (await boss.insert(QUEUE, payloads.map((data) => ({ data })), { returnId: true }))?.length ?? 0,
      // boss.flow(): any DAG, each job naming its parents by ref (dependsOn), in one transaction.
      enqueueFlow: async (shape, sizes, flow) =>
        void (await boss.flow(flowPlan(shape, sizes, 'dag', flow).map((job) => ({ ref: job.ref, name: QUEUE, data: job.payload, dependsOn: job.parents })))),
      stop: () => boss.stop({ graceful: true, timeout: 10_000 }),
    };
  },
};

/**
 * The flows scenario's worker: the same loops x batch as the other scenarios, with what flows need.
 * - perJobResults: each job of a batch completes with its own output (its result, which its dependents read);
 *   a plain batch handler would store one output for the whole batch.
 * - pollingIntervalSeconds and notifyPollingIntervalSeconds at their minimum, 0.5 s: the resolver that unblocks
 *   a dependent sends no NOTIFY, so an idle worker learns of it only by polling (by default every 30 s with
 *   NOTIFY on, 2 s without).
 * A dependent reads its parents' results as pg-boss offers: getDependencies (the parents' ids), then findJobs
 * per parent for its output (there is no call for many ids); fetched side by side, as an app would.
 */
async function workFlows(boss: PgBoss, concurrency: number, onJob: (payload: FlowPayload) => void, end: (payload: FlowPayload, parentsRead: number) => void): Promise<void> {
  const shape = pgBossShape(concurrency);
  await boss.work<FlowPayload>(
    QUEUE,
    { ...shape, burstWhenBatchFull: shape.batchSize > 1, perJobResults: true, pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: 0.5 },
    async (jobs) =>
      Promise.all(
        jobs.map(async (job) => {
          onJob(job.data);
          let read = 0;
          if (job.data.p > 0) {
            const parents = await boss.getDependencies(QUEUE, job.id, { limit: job.data.p });
            const rows = await Promise.all(parents.map((parent) => boss.findJobs<FlowPayload>(parent.name, { id: parent.id })));
            read = rows.filter(([row]) => row?.state === 'completed' && (row.output as FlowResult | null)?.r === row.data.r).length;
          }
          end(job.data, read);
          return { id: job.id, status: 'completed' as const, output: { r: job.data.r } satisfies FlowResult };
        }),
      ),
  );
}
