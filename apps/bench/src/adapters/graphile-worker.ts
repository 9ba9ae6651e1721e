import { Logger, makeWorkerUtils, run, type Runner, type WorkerUtils } from 'graphile-worker';
import pg from 'pg';
import { QUEUE, work, type Adapter, type AdapterOptions, type BenchPayload, type RunningSystem } from './types.js';

/** graphile-worker logs every start at info level; keep errors and warnings only. */
const quietLogger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') console.error(`[graphile-worker] ${message}`);
});

/**
 * graphile-worker with the configuration its performance page uses for its own figures
 * (https://worker.graphile.org/docs/performance): a local queue of 500 jobs fetched in one statement,
 * completions and failures batched (delay 0: the next tick) and prepared statements (its default). The
 * pool is ours to size (options.poolSize; the scenarios follow its advice, "10 or concurrentJobs + 2,
 * whichever is larger", for every system).
 * LISTEN/NOTIFY is built in; pollInterval stays at its default (2 s).
 */
export const graphileWorkerAdapter: Adapter = {
  async start(options: AdapterOptions): Promise<RunningSystem> {
    const pool = new pg.Pool({ connectionString: options.url, max: options.poolSize, application_name: `bench graphile-worker ${options.role}` });
    // graphile-worker checks that a pool it is given handles errors on idle clients as well as on the pool.
    pool.on('error', (error) => console.error(`[graphile-worker pool] ${error.message}`));
    pool.on('connect', (client) => client.on('error', (error) => console.error(`[graphile-worker client] ${error.message}`)));
    let runner: Runner | undefined;
    let utils: WorkerUtils | undefined;
    if (options.role === 'worker') {
      runner = await run({
        pgPool: pool,
        concurrency: options.concurrency,
        noHandleSignals: true,
        logger: quietLogger,
        taskList: {
          [QUEUE]: async (payload) => {
            options.onJob(payload as BenchPayload);
            await work(options.jobMs);
          },
        },
        preset: {
          worker: {
            preparedStatements: true,
            localQueue: { size: 500 },
            completeJobBatchDelay: 0,
            failJobBatchDelay: 0,
          },
        },
      });
    } else {
      utils = await makeWorkerUtils({ pgPool: pool, logger: quietLogger });
      await utils.migrate();
    }
    const addJob = runner ? runner.addJob.bind(runner) : utils!.addJob.bind(utils);
    const addJobs = async (payloads: BenchPayload[]) => {
      // Runner has no addJobs; WorkerUtils does, on the same pool.
      utils ??= await makeWorkerUtils({ pgPool: pool, logger: quietLogger });
      return (await utils.addJobs(payloads.map((payload) => ({ identifier: QUEUE, payload })))).length;
    };
    return {
      enqueue: async (payload) => void (await addJob(QUEUE, payload)),
      enqueueMany: addJobs,
      stop: async () => {
        await runner?.stop();
        await utils?.release();
        await pool.end();
      },
    };
  },
};
