import type { LoggerService } from '@nestjs/common';
import { JobSnoozedError, RateLimitedError } from '../errors/pg-queue.error.js';
import type { BackoffFunction } from '../interfaces/job-handler-options.interface.js';
import { BAD_RATE_LIMITED_DELAY, BAD_SNOOZE_DELAY } from '../pg-queue.messages.js';
import { MAX_BLOCK_MS } from '../utils/resolve-options.js';
import { retryDelay, snoozeDelay } from '../utils/backoff.js';
import { PayloadRefusedAtStartError } from '../typed/payload-check-at-start.js';
import { errorText, isInstanceOf } from '../utils/error-text.js';
import type { HeldJob } from './held-job.js';
import { ResultRefusedError, storedResult } from './stored-result.js';

export interface OutcomeRules {
  queue: string;
  backoff: BackoffFunction;
  /** The module's maxResultBytes: a larger result fails the attempt for good. */
  maxResultBytes: number;
  logger: LoggerService;
}

/**
 * Decides what an ended attempt writes, on the job itself (failure, snoozeMs, resultJson): a completion (with
 * its result as JSON when there is one), a snooze, a failure to retry after the backoff, or a failure for good
 * (a result the queue cannot store, or a payload its queue's validator refuses, would be the same on every retry). Never throws: whatever the handler
 * threw is only read inside try blocks (a revoked Proxy throws even on `instanceof`), and if reading it fails
 * the attempt fails with a text that says so. Returns a problem of the queue's backoff function to log once.
 */
export function decideOutcome(job: HeldJob, error: unknown, result: unknown, rules: OutcomeRules): string | undefined {
  try {
    job.result = result;
    // A result is stored only when there is one (undefined and null store nothing and cost one comparison).
    if (error === undefined && result != null) {
      const stored = storedResult(rules.queue, job.id, result, rules.maxResultBytes);
      if ('refused' in stored) error = stored.refused;
      else job.resultJson = stored.json;
    }
    if (error === undefined) return undefined;
    if (isInstanceOf(error, ResultRefusedError) || isInstanceOf(error, PayloadRefusedAtStartError)) {
      // The message alone (the stack says nothing here), made storable: a validator's reason may quote the payload.
      job.failure = { error: errorText(error.message), retryDelayMs: 0, thrown: error, final: true };
      return undefined;
    }
    if (isInstanceOf(error, RateLimitedError)) {
      // A partner's 429: back to the queue uncharged, as a snooze; the worker blocks the queue (or key) for everyone.
      const asked = error.delayMs;
      const ms = typeof asked === 'number' && Number.isFinite(asked) ? Math.min(MAX_BLOCK_MS, Math.max(1, Math.round(asked))) : 1_000;
      if (ms !== asked) rules.logger.warn(BAD_RATE_LIMITED_DELAY(rules.queue, job.id, asked, ms));
      const key = typeof error.key === 'string' ? error.key : undefined;
      job.snoozeMs = ms;
      job.rateLimited = { ms, key, note: `rate limited by the partner for ${ms} ms${key === undefined ? '' : ` (key ${JSON.stringify(key)})`}` };
      return undefined;
    }
    if (isInstanceOf(error, JobSnoozedError)) {
      const { delayMs, clamped } = snoozeDelay(error.delayMs);
      if (clamped) rules.logger.warn(BAD_SNOOZE_DELAY(rules.queue, job.id, error.delayMs, delayMs));
      job.snoozeMs = delayMs;
      return undefined;
    }
    let retryDelayMs = 0;
    let problem: string | undefined;
    if (job.attempt < job.maxAttempts) {
      const delay = retryDelay(rules.backoff, job.attempt, error, rules.queue);
      retryDelayMs = delay.delayMs;
      problem = delay.problem;
    }
    job.failure = { error: errorText(error), retryDelayMs, thrown: error };
    return problem;
  } catch (unreadable) {
    job.resultJson = undefined;
    job.snoozeMs = undefined;
    job.rateLimited = undefined;
    const text = `the handler's ${error === undefined ? 'result' : 'error'} could not be read (${safeText(unreadable)})`;
    job.failure = { error: text, retryDelayMs: 0, thrown: new Error(text) };
    return undefined;
  }
}

function safeText(value: unknown): string {
  try {
    return errorText(value).split('\n', 1)[0];
  } catch {
    return 'unreadable';
  }
}
