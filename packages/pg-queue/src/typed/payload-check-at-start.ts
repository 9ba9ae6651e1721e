import { InvalidPayloadError } from '../errors/invalid-payload.error.js';
import type { BatchJob, Job } from '../interfaces/job.interface.js';
import { PAYLOAD_REFUSED_AT_START } from '../pg-queue.messages.js';
import { judgePayload, validatorOf, type Verdict } from './payload-validators.js';

/**
 * A job's payload refused by its queue's validator just before the handler would have run it. The worker fails
 * such a job for good, without retries: every retry would bring the same payload.
 */
export class PayloadRefusedAtStartError extends InvalidPayloadError {
  override name = 'PayloadRefusedAtStartError';
}

/**
 * The handle of a queue's handler, with the queue's validator in front when it has one (queues without one keep
 * the handle as it is). An enqueue in this process was checked already; this catches the jobs enqueued where the
 * validator was not loaded (the CLI, raw SQL, another app), which would otherwise run with a payload the handler's
 * type does not describe.
 */
export function checkedAtStart(queue: string, handle: (job: Job) => unknown): (job: Job) => unknown {
  const validate = validatorOf(queue);
  if (!validate) return handle;
  const refuseOrRun = (job: Job, verdict: Verdict) => {
    if (verdict) throw new PayloadRefusedAtStartError(PAYLOAD_REFUSED_AT_START(queue, job.id, verdict.reason), queue, verdict.reason, undefined, verdict.cause === undefined ? undefined : { cause: verdict.cause });
    return handle(job);
  };
  return (job) => {
    const verdict = judgePayload(validate, job.payload);
    return verdict instanceof Promise ? verdict.then((v) => refuseOrRun(job, v)) : refuseOrRun(job, verdict);
  };
}

/**
 * checkedAtStart for a batch handler's calls: each job's payload is judged; a refused job fails for good on its own
 * (job.fail, as a refused single job does) and is left out of the call; the call runs with the others (not at all
 * when every job was refused).
 */
export function batchCheckedAtStart(queue: string, handle: (jobs: Job[]) => unknown): (jobs: Job[]) => unknown {
  const validate = validatorOf(queue);
  if (!validate) return handle;
  return async (jobs) => {
    const accepted: Job[] = [];
    for (const job of jobs) {
      const verdict = await judgePayload(validate, job.payload);
      if (!verdict) accepted.push(job);
      else {
        const refused = new PayloadRefusedAtStartError(PAYLOAD_REFUSED_AT_START(queue, job.id, verdict.reason), queue, verdict.reason, undefined, verdict.cause === undefined ? undefined : { cause: verdict.cause });
        (job as BatchJob).fail(refused);
      }
    }
    return accepted.length > 0 ? handle(accepted) : undefined;
  };
}
