import type { LoggerService } from '@nestjs/common';
import { FORGET_GONE_INSTANCES_AFTER_MS } from '../pg-queue.constants.js';
import type { JobStore } from '../store/job.store.js';

/** Keys with a waiting successor one sweeper pass looks at (its safety net; normally none is stranded). */
const STRANDED_SUCCESSORS_BATCH = 500;

export interface SweepResult {
  /** False when another instance held the sweep lock and this pass did nothing. */
  ran: boolean;
  requeued: number;
  failed: number;
}

/**
 * Puts jobs whose lease expired (their worker crashed, froze or lost the database) back in the queue, or
 * dead-letters them when that was their last attempt. Live jobs renew their lease on every heartbeat,
 * so a long job is never taken from a healthy worker.
 */
export class Sweeper {
  constructor(
    private readonly store: JobStore,
    private readonly logger: LoggerService,
  ) {}

  async runOnce(): Promise<SweepResult> {
    const { held, requeued, failed, openFlows } = await this.store.rescueExpiredLeases();
    if (requeued + failed > 0) {
      this.logger.warn(`sweeper: ${requeued} job(s) with an expired lease put back in the queue, ${failed} dead-lettered (no attempts left)`);
    }
    // Flows' safety net (store/flow.sql.ts, unblockStranded): what a worker that died between its settle's commit and its second look
    // left undone. On the instance whose pass holds the sweep lock only; two at once would be correct, just redundant.
    if (held && openFlows) {
      const stranded = await this.store.flows.rescueStranded();
      if (stranded.unblocked + stranded.cancelled + stranded.settled > 0) {
        this.logger.warn(`sweeper: flows: ${stranded.unblocked} dependent job(s) unblocked, ${stranded.cancelled} job(s) of failed flows cancelled, ${stranded.settled} flow(s) settled that no worker had finished`);
      }
    }
    // Successors (onConflict 'queue-after') whose holder ended by a statement that did not step them (an operator's raw
    // SQL, a flow's cancel of a queued holder): promoted here. Every statement of the library that ends a job steps them.
    if (held) {
      const promoted = await this.store.stepStrandedSuccessors(STRANDED_SUCCESSORS_BATCH);
      if (promoted > 0) this.logger.warn(`sweeper: ${promoted} waiting successor(s) (onConflict 'queue-after') started, whose holder had ended without starting them`);
    }
    // The instances registry's rows of processes that stopped writing an hour ago: a crashed process shows as gone
    // for that hour (the dashboard, doctor), then leaves no trace. A DELETE of the few expired rows, under the lock.
    if (held) await this.store.instances.forgetExpired(FORGET_GONE_INSTANCES_AFTER_MS);
    return { ran: held, requeued, failed };
  }
}
