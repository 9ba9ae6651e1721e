import { createPostgresBackend, withBackend, type PostgresPoolConfig } from 'bullmq';
import { flowPlan, type FlowJobPlan, type FlowPayload, type FlowResult } from './flow-shapes.js';
import { QUEUE, work, type Adapter, type AdapterOptions, type BenchPayload, type RunningSystem } from './types.js';

/** BullMQ's classes bound to its PostgreSQL backend, as its PostgreSQL guide shows for typed jobs. */
const { Queue, Worker, FlowProducer } = withBackend(createPostgresBackend);

type FlowNode = Parameters<InstanceType<typeof FlowProducer>['add']>[0];

/**
 * BullMQ 6 on its PostgreSQL backend, with what its PostgreSQL guide (https://docs.bullmq.io/guide/postgresql,
 * "Tuning tips") gives for throughput: one Worker per process with `concurrency` = the benchmark's
 * concurrency, a pool (`max`) sized for that concurrency. Open-source BullMQ has no batch fetch or batch
 * completion (those are BullMQ Pro's): each slot claims one job, and its completion claims the next in the
 * same statement (`move_to_completed_fetch`), so there is no batch setting to tune. Idle workers block on
 * its own LISTEN connection (outside the pool), woken by the NOTIFY its add functions send.
 *
 * Everything else at BullMQ's defaults, as for the other libraries: lock 30 s renewed every 15 s, stalled
 * check every 30 s, finished jobs kept (no removeOnComplete: nestjs-pg-queue and pg-boss keep theirs too),
 * its event stream on (every job writes 'added', 'waiting', 'active' and 'completed' rows to `bullmq.event`,
 * trimmed to about 10,000; QueueEvents reads it). The guide's other tips are database settings
 * (`synchronous_commit`) or deployment (keep the database close), the same for every system here.
 */
export const bullmqAdapter: Adapter = {
  async start(options: AdapterOptions): Promise<RunningSystem> {
    // A config object (not a bare string): BullMQ builds and owns the pool, pins its search_path to the
    // `bullmq` schema, and `migrate: true` creates the schema on a fresh database (without it BullMQ throws
    // SchemaMigrationRequiredError; migrations take an advisory lock, so concurrent starts are safe).
    const connection = (role: string): PostgresPoolConfig => ({
      connectionString: options.url,
      max: options.poolSize,
      migrate: true,
      application_name: `bench bullmq ${role}`,
    });
    // The producer side every process has (the app's enqueue calls), on its own pool as BullMQ builds one per class.
    const queue = new Queue<BenchPayload, void, typeof QUEUE>(QUEUE, { connection: connection(`${options.role} queue`) });
    queue.on('error', (error: Error) => console.error(`[bullmq queue] ${error.message}`));
    await queue.waitUntilReady();
    await applyLimits(queue, options);
    let worker: InstanceType<typeof Worker<BenchPayload, FlowResult | void, typeof QUEUE>> | undefined;
    const flowEnd = options.onFlowJobEnd;
    if (options.role === 'worker') {
      worker = new Worker<BenchPayload, FlowResult | void, typeof QUEUE>(
        QUEUE,
        async (job) => {
          options.onJob(job.data);
          if (flowEnd) {
            // A flow job: a parent (the dependent) reads its children's results with getChildrenValues (one call).
            const payload = job.data as FlowPayload;
            let read = 0;
            if (payload.p > 0) {
              const values = (await job.getChildrenValues<FlowResult | null>()) ?? {};
              read = Object.values(values).filter((value) => typeof value?.r === 'string').length;
            }
            flowEnd(payload, read);
            return { r: payload.r };
          }
          await work(options.jobMs);
        },
        { connection: connection('worker'), concurrency: options.concurrency },
      );
      worker.on('error', (error: Error) => console.error(`[bullmq worker] ${error.message}`));
      await worker.waitUntilReady();
    }
    // The flows scenario's producer side, made on first use (no pool for the other scenarios).
    let flowProducer: InstanceType<typeof FlowProducer> | undefined;
    return {
      enqueue: async (payload) => void (await queue.add(QUEUE, payload)),
      // FlowProducer.add: one tree per call, stored in one transaction.
      enqueueFlow: async (shape, sizes, flow) => {
        flowProducer ??= new FlowProducer({ connection: connection('flow producer') });
        await flowProducer.add(flowTree(flowPlan(shape, sizes, 'tree', flow)));
      },
      // addBulk of independent jobs is one statement (its add_jobs_bulk function), ids returned in order.
      enqueueMany: async (payloads) => (await queue.addBulk(payloads.map((data) => ({ name: QUEUE, data })))).filter((job) => job.id !== undefined).length,
      stop: async () => {
        // close() waits for the jobs in flight to finish, then closes the pool and the LISTEN connection.
        await worker?.close();
        await flowProducer?.close();
        await queue.close();
      },
    };
  },
};

/**
 * A flow planned as a DAG, as BullMQ stores it: a tree whose parent runs after its children. Our dependent is
 * BullMQ's parent and our parents are its children, so the job nobody depends on is the tree's root. It holds
 * only when every job has at most one dependent (flowPlan with the 'tree' model makes sure: a chain, a fan-in);
 * anything else is refused rather than flattened into another shape.
 */
function flowTree(jobs: FlowJobPlan[]): FlowNode {
  const byRef = new Map(jobs.map((job) => [job.ref, job]));
  const dependents = new Map<string, number>();
  for (const job of jobs) for (const parent of job.parents) dependents.set(parent, (dependents.get(parent) ?? 0) + 1);
  if ([...dependents.values()].some((n) => n > 1)) throw new Error('BullMQ flows are trees: a job cannot have two dependents');
  const roots = jobs.filter((job) => !dependents.has(job.ref));
  if (roots.length !== 1) throw new Error(`BullMQ flows are trees with one root; this flow has ${roots.length}`);
  const node = (job: FlowJobPlan): FlowNode => {
    const base = { name: QUEUE, queueName: QUEUE, data: job.payload };
    return job.parents.length ? { ...base, children: job.parents.map((ref) => node(byRef.get(ref)!)) } : base;
  };
  return node(roots[0]);
}

/**
 * The limits scenario. BullMQ's limit across instances is the queue's global concurrency, kept in the
 * database (its `meta` table) and checked by every claim under an advisory lock; every worker process sets
 * the same value, which is idempotent. Limits per key are groups, a BullMQ Pro feature: the scenario never
 * asks (SystemInfo.limits), and a caller that does gets a refusal rather than an unlimited run.
 */
async function applyLimits(queue: { setGlobalConcurrency(concurrency: number): Promise<unknown> }, options: AdapterOptions): Promise<void> {
  if (!options.limits) return;
  const { globalConcurrency, concurrencyPerKey } = options.limits;
  if (concurrencyPerKey !== undefined) {
    throw new Error('BullMQ has no concurrency limit per key in its open-source package (groups are BullMQ Pro\'s): not measured');
  }
  if (globalConcurrency !== undefined) await queue.setGlobalConcurrency(globalConcurrency);
}
