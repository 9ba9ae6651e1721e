import type { LoggerService } from '@nestjs/common';
import type { JobEventName, JobEvents } from '../events/job-events.js';
import type { JobStatus } from '../interfaces/job.interface.js';
import { errorLine } from '../utils/error-text.js';
import type { HeldJob } from './held-job.js';

/** What one attempt tells the app: its log lines and its JobEvents (metrics, @OnJobEvent, tracing). */
export class AttemptReport {
  constructor(
    private readonly queue: string,
    private readonly workerId: string,
    private readonly logger: LoggerService,
    private readonly events: JobEvents,
  ) {}

  /** Hands one event of this attempt to the JobEvents listeners (callers check `events.observed` first on hot paths). */
  emit(name: JobEventName, job: HeldJob, extra: { result?: unknown; error?: unknown; retryDelayMs?: number; claimLatencyMs?: number } = {}): void {
    if (!this.events.observed) return;
    const durationMs = name === 'active' ? 0 : (job.endedAt || performance.now()) - job.startedAt;
    this.events.emit({ name, job, workerId: this.workerId, durationMs, ...extra });
  }

  /**
   * An attempt's outcome was answered: `status` is what its row became (undefined: fenced out). Returns the ms
   * until the job is due again (a retry, a snooze), for the claim loop's timer: armed after the write, so
   * the job is there to claim.
   */
  written(job: HeldJob, status: JobStatus | undefined): number | undefined {
    const { queue, workerId, logger } = this;
    const failure = job.failure;
    if (status === undefined) {
      const what = job.snoozeMs !== undefined ? 'snoozed' : failure ? 'failed' : 'finished';
      logger.warn(`job ${job.id} (${queue}) ${what} on ${workerId}, but it no longer held the job: outcome discarded`);
      return undefined;
    }
    if (job.snoozeMs !== undefined) return job.snoozeMs;
    if (!failure) {
      if (this.events.observed) this.emit('completed', job, { result: job.result });
      return undefined;
    }
    if (status === 'failed') {
      logger.error(`job ${job.id} (${queue}) failed for good after ${job.attempt} attempt(s): ${errorLine(failure.thrown)}`);
      if (this.events.observed) {
        this.emit('failed', job, { error: failure.thrown });
        this.emit('dead', job, { error: failure.thrown });
      }
      return undefined;
    }
    logger.warn(`job ${job.id} (${queue}) attempt ${job.attempt}/${job.maxAttempts} failed, retry in ${failure.retryDelayMs} ms: ${errorLine(failure.thrown)}`);
    if (this.events.observed) {
      this.emit('failed', job, { error: failure.thrown });
      this.emit('retrying', job, { error: failure.thrown, retryDelayMs: failure.retryDelayMs });
    }
    return failure.retryDelayMs;
  }
}
