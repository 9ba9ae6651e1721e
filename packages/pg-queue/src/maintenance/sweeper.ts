import type { LoggerService } from '@nestjs/common';
import type { JobStore } from '../store/job.store.js';

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
    const { held, requeued, failed } = await this.store.rescueExpiredLeases();
    if (requeued + failed > 0) {
      this.logger.warn(`sweeper: ${requeued} job(s) with an expired lease put back in the queue, ${failed} dead-lettered (no attempts left)`);
    }
    return { ran: held, requeued, failed };
  }
}
