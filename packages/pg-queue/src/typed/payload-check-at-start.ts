import { InvalidPayloadError } from '../errors/invalid-payload.error.js';
import type { Job } from '../interfaces/job.interface.js';
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
