import { PgQueueError } from '../../errors/pg-queue.error.js';
import type { Job } from '../../interfaces/job.interface.js';
import type { JobAttempt } from '../job-attempt.js';
import type { ThreadPool } from './thread-pool.js';

/**
 * A thread handler's attempt as the worker calls it: an ordinary handler from the worker's side (a promise of the
 * result, or of the error), so the lease, heartbeat, timeout, cancel, retries and the outcome's write are the same code
 * as any handler's; the pool runs the job on a thread and forwards the attempt's abort and progress. Without a pool
 * (an app with `workers: false`) there is nothing to run it on.
 */
export function threadHandle(queue: string, pool: ThreadPool | undefined): (job: Job) => Promise<unknown> {
  if (!pool) {
    return () => Promise.reject(new PgQueueError(`@JobHandler('${queue}', { thread }): this app runs no workers (workers: false), so it has no threads to run the job on.`));
  }
  return (job) => pool.run(job as JobAttempt);
}
