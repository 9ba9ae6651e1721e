import type { LoggerService } from '@nestjs/common';
import type { FailedAttempt, JobRef, JobStore } from '../store/job.store.js';
import { RetryBackoff, wakeableSleep } from '../utils/retry-backoff.js';
import type { RowLockLane } from './row-lock-lane.js';

/** A finished attempt waiting for its completion to be written; told whether the write was accepted. */
export interface PendingCompletion extends JobRef {
  completed(accepted: boolean): void;
}

/**
 * Writes job outcomes in batches: completions in one statement, failures in another. A write starts as
 * soon as an outcome arrives and no write is in flight; outcomes that arrive meanwhile ride the next one.
 * Zero added latency when idle, large batches under load (20k jobs settle in a few hundred statements).
 * When the database is unreachable the batch is kept and retried with backoff; the leases of those jobs
 * are renewed meanwhile, so nothing is redone unless this process dies. How many outcomes may wait is
 * bounded by the claim loops (QueueWorker.unwritten), not here.
 */
export class OutcomeWriter {
  private completions: PendingCompletion[] = [];
  private failures: { attempt: FailedAttempt; done: (status: string | undefined) => void }[] = [];
  private flushing: Promise<void> | undefined;
  private readonly backoff: RetryBackoff;
  private closed = false;
  private wakeFromBackoff: (() => void) | undefined;

  constructor(
    private readonly store: JobStore,
    private readonly workerId: string,
    private readonly logger: LoggerService,
    private readonly lane: RowLockLane,
    /** completedRetentionMs is 0: completed jobs are deleted at once rather than kept for the pruner. */
    private readonly deleteCompleted = false,
    private readonly maxBatch = 1_000,
  ) {
    this.backoff = new RetryBackoff('writing job outcomes', logger);
  }

  /**
   * `pending.completed(true)` once recorded, `(false)` when fenced out (this worker no longer owned the job).
   * A callback on the attempt itself, not a promise: no allocation per job on the hot path.
   */
  complete(pending: PendingCompletion): void {
    this.completions.push(pending);
    this.kick();
  }

  /** `done` gets the status the job ended in (queued for a retry, failed), or undefined when fenced out. */
  fail(attempt: FailedAttempt, done: (status: string | undefined) => void): void {
    this.failures.push({ attempt, done });
    this.kick();
  }

  /** Resolves when every outcome handed in so far is written (or fenced). */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  /**
   * Shutdown, past the drain deadline: stop retrying. Outcomes still unwritten are dropped (their promises
   * never settle); their leases expire and the sweeper runs those jobs again. Without this, a writer whose
   * pool was closed under it kept the process alive, retrying forever.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.wakeFromBackoff?.();
    if (!this.flushing) this.dropUnwritten();
  }

  private dropUnwritten(): void {
    const dropped = this.completions.length + this.failures.length;
    this.completions = [];
    this.failures = [];
    if (dropped > 0) {
      this.logger.error(`shutdown: ${dropped} job outcome(s) could not be written in time; those jobs run again once their lease expires`);
    }
  }

  private kick(): void {
    if (this.closed) return;
    this.flushing ??= this.flush().finally(() => {
      this.flushing = undefined;
      if (this.completions.length || this.failures.length) this.kick();
    });
  }

  private async flush(): Promise<void> {
    while (!this.closed && (this.completions.length || this.failures.length)) {
      const completions = this.completions.splice(0, this.maxBatch);
      const failures = this.failures.splice(0, this.maxBatch);
      const [completed, failed] = await this.lane.run(() =>
        Promise.allSettled([
          completions.length ? this.store.completeJobs(this.workerId, completions, this.deleteCompleted) : new Set<string>(),
          failures.length ? this.store.failJobs(this.workerId, failures.map((f) => f.attempt)) : new Map<string, string>(),
        ]),
      );
      // A statement that failed wrote nothing (each is atomic): put its batch back in front and retry it.
      if (completed.status === 'fulfilled') for (const c of completions) c.completed(!completed.value.has(c.id));
      else this.completions.unshift(...completions);
      if (failed.status === 'fulfilled') for (const f of failures) f.done(failed.value.get(f.attempt.id));
      else this.failures.unshift(...failures);
      const error = completed.status === 'rejected' ? completed.reason : failed.status === 'rejected' ? failed.reason : undefined;
      if (error === undefined) this.backoff.succeeded();
      else {
        // close() cuts the wait short, so shutdown does not wait out a 10 s backoff.
        const backoff = wakeableSleep(this.backoff.failed(error));
        this.wakeFromBackoff = backoff.wake;
        await backoff.done;
      }
    }
    if (this.closed) this.dropUnwritten();
  }
}
