import { Injectable, Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { JobHandler, type Job } from 'nestjs-pg-queue';
import { Sync, type SyncPayload } from '../queues/sync.queue.js';

/** Share of attempts the pretend CRM answers with an error. */
const FAILURE_RATE = 0.4;

/**
 * Pushes records to an unreliable remote API. It exists to make retries, backoff and dead letters visible:
 * with baseMs 500 the retries come about 1 s and 2 s after the failures, so a job that fails 3 times is
 * dead-lettered within a few seconds instead of the default minutes.
 */
@Injectable()
export class FlakySyncHandler {
  private readonly logger = new Logger('Sync');

  @JobHandler(Sync, { concurrency: 3, maxAttempts: 3, backoff: { baseMs: 500 } })
  async sync(job: Job<SyncPayload>): Promise<void> {
    await sleep(100 + Math.random() * 200, undefined, { signal: job.signal });
    const { recordId, corrupt } = job.payload;
    if (corrupt) throw new Error(`CRM rejected record ${recordId}: 422 field "email" is invalid`);
    if (Math.random() < FAILURE_RATE) throw new Error(`CRM unavailable: 503 for record ${recordId}`);
    this.logger.log(`job ${job.id}: record ${recordId} synced (attempt ${job.attempt}/${job.maxAttempts})`);
  }
}
