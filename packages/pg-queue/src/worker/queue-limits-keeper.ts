import type { LoggerService } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { effectiveLimits, sameLimits, type EffectiveLimits } from '../limits/queue-limits.js';
import { LIMITS_APPLIED, RATE_LIMITED_BLOCK } from '../pg-queue.messages.js';
import type { JobStore } from '../store/job.store.js';
import { errorLine } from '../utils/error-text.js';
import { RetryBackoff } from '../utils/retry-backoff.js';

/**
 * How often a process reads its queues' rows again without a notice: the fallback that bounds how long a change of
 * limits or a 429's block takes to reach it when a notice is lost (LISTEN down, a reconnect): half a second, so that
 * a change is in force everywhere within a second of its commit, the read's round trip included.
 */
export const QUEUE_LIMITS_REREAD_MS = 500;

/** How many times a block of a partner's 429 is tried before it is given up (logged); the job went back uncharged anyway. */
const BLOCK_TRIES = 5;

/** What the keeper changes in a queue's worker (QueueWorker). */
export interface LimitsTarget {
  applyLimits(limits: EffectiveLimits, keyBlocks: boolean, lifoJobs: boolean, storedLimits: string | null): void;
  blockedFor(ms: number): void;
}

/** One queue this process serves: its decorator's limits (the defaults) and its worker. */
export interface KeptQueue {
  defaults: EffectiveLimits;
  worker: LimitsTarget;
}

/** What the workers tell the keeper of their handlers' ends (SharedParts.rateLimits). */
export interface RateLimitSink {
  /** A handler threw RateLimitedError: block the queue (or its key) for `ms` in every process. */
  rateLimited(queue: string, ms: number, key: string | undefined, maxMs: number): void;
  /** A job of the queue completed: an adaptive backoff waiting for a success starts again from the partner's ms. */
  succeeded(queue: string): void;
}

/**
 * The limits of this process's queues, as their rows say (issue 42, part 2): the row of background_queues is the only
 * truth (docs/concepts.md, One owner for each fact); this process holds a copy it reads again on every notice
 * (LIMITS_CHANNEL: a change, a block) and every QUEUE_LIMITS_REREAD_MS, and applies to its workers only what changed.
 * It also writes the blocks of its handlers' 429s and resets the adaptive backoff after a success.
 */
export class QueueLimitsKeeper implements RateLimitSink {
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private readAgain = false;
  private stopped = false;
  /** What each worker was last given; starts as the decorator's, so that a row with nothing stored changes nothing. */
  private readonly applied = new Map<string, { limits: EffectiveLimits; keyBlocks: boolean; lifoJobs: boolean; stored: string | null }>();
  /** Queues whose row says an adaptive backoff waits for a success (the only ones a completion costs a statement). */
  private readonly backoffs = new Set<string>();
  private readonly failures: RetryBackoff;

  constructor(
    private readonly store: JobStore,
    private readonly queues: ReadonlyMap<string, KeptQueue>,
    private readonly logger: LoggerService,
    /** Before and after a block is stored: this process's own buffers of the queue are checked (WorkerPool.checkBuffer). */
    private readonly review: (queue: string) => void,
    private readonly everyMs = QUEUE_LIMITS_REREAD_MS,
  ) {
    this.failures = new RetryBackoff('reading the queues\' limits', logger);
    for (const [queue, q] of queues) this.applied.set(queue, { limits: q.defaults, keyBlocks: false, lifoJobs: false, stored: null });
  }

  /** Starts the reads; resolves when the first has answered or failed (the workers claim from then on). */
  start(): Promise<void> {
    if (this.timer || this.queues.size === 0) return Promise.resolve();
    this.timer = setInterval(() => this.read(), this.everyMs).unref();
    this.read();
    return this.reading ?? Promise.resolve();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.reading;
  }

  /** Reads the rows now (a notice, a block of this process, the timer); one read at a time, one more after it if asked meanwhile. */
  read(): void {
    if (this.stopped) return;
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.reading = this.readOnce().finally(() => {
      this.reading = undefined;
      if (this.readAgain) {
        this.readAgain = false;
        this.read();
      }
    });
  }

  private async readOnce(): Promise<void> {
    let rows;
    try {
      rows = await this.store.queueSettings([...this.queues.keys()]);
      this.failures.succeeded();
    } catch (error) {
      // Logged once per outage (RetryBackoff); the timer tries again, and until then the workers keep the last limits read.
      this.failures.failed(error);
      return;
    }
    const byQueue = new Map(rows.map((r) => [r.queue, r]));
    for (const [queue, q] of this.queues) {
      const row = byQueue.get(queue);
      const limits = effectiveLimits(q.defaults, row?.limits ?? null);
      const keyBlocks = (row?.keyBlockedMs ?? 0) > 0;
      // The queue has had a job enqueued with `lifo: true`: its claims take LIFO jobs first from now on (ClaimOrder).
      const lifoJobs = row?.lifoJobs === true;
      // The row's text of what is stored, which the worker's claims send back: any change of it is passed on (even
      // one that leaves the limits in force as they were), or the claims would find the row differs and take nothing.
      const stored = row?.limitsText ?? null;
      const last = this.applied.get(queue)!;
      if (!sameLimits(last.limits, limits) || last.keyBlocks !== keyBlocks || last.lifoJobs !== lifoJobs || last.stored !== stored) {
        this.applied.set(queue, { limits, keyBlocks, lifoJobs, stored });
        if (!sameLimits(last.limits, limits)) this.logger.log(LIMITS_APPLIED(queue, describeLimits(limits)));
        this.guarded(queue, () => q.worker.applyLimits(limits, keyBlocks, lifoJobs, stored));
      }
      // Claims during a block take nothing and come back short: the worker looks again when it ends (and when a key's
      // block ends, to claim that key's jobs and to go back to the plain claim at the next read).
      const until = Math.max(row?.blockedMs ?? 0, row?.keyBlockedMs ?? 0);
      if (until > 0) this.guarded(queue, () => q.worker.blockedFor(until));
      if (row?.backoff) this.backoffs.add(queue);
      else this.backoffs.delete(queue);
    }
  }

  /** The limits this process applies to the queue now (its last read), for the instance's registration. */
  inForce(queue: string): EffectiveLimits | undefined {
    return this.applied.get(queue)?.limits;
  }

  rateLimited(queue: string, ms: number, key: string | undefined, maxMs: number): void {
    void this.block(queue, ms, key, maxMs);
  }

  private async block(queue: string, ms: number, key: string | undefined, maxMs: number): Promise<void> {
    // As a pause: nothing held here starts from the buffer while the block is on its way, and a check follows its commit.
    if (key === undefined) this.review(queue);
    const retry = new RetryBackoff(`blocking queue "${queue}" after a partner's 429`, this.logger);
    for (let tries = 1; ; tries++) {
      try {
        const left = await this.store.blockQueue(queue, ms, maxMs, key);
        this.logger.log(RATE_LIMITED_BLOCK(queue, key, left));
        break;
      } catch (error) {
        const waitMs = retry.failed(error);
        if (tries >= BLOCK_TRIES || this.stopped) {
          this.logger.error(`queue "${queue}": the block of a partner's 429 (${ms} ms) was not stored after ${tries} tries (${errorLine(error)}); other processes may start jobs meanwhile`);
          return;
        }
        await sleep(waitMs);
      }
    }
    if (key === undefined) this.review(queue);
    this.backoffs.add(queue);
    this.read();
  }

  succeeded(queue: string): void {
    if (!this.backoffs.delete(queue)) return;
    this.store.resetBackoff(queue).catch((error: unknown) => {
      // The next success tries again (the set is filled again by the next read).
      this.logger.warn(`queue "${queue}": the partner's backoff was not reset after a success (${errorLine(error)})`);
    });
  }

  private guarded(queue: string, step: () => void): void {
    try {
      step();
    } catch (error) {
      this.logger.error(`queue "${queue}": applying its limits: ${errorLine(error)}`);
    }
  }
}

/** The limits in force in a log line. */
export function describeLimits(l: EffectiveLimits): string {
  const parts = [`concurrency ${l.concurrency}`];
  if (l.globalConcurrency !== undefined) parts.push(`globalConcurrency ${l.globalConcurrency}`);
  if (l.rateLimit !== undefined) parts.push(`rateLimit ${l.rateLimit.max}/${l.rateLimit.intervalMs} ms`);
  if (l.concurrencyPerKey !== undefined) parts.push(`concurrencyPerKey ${l.concurrencyPerKey}`);
  return parts.join(', ');
}
