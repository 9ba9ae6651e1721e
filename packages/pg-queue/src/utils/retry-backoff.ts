import type { LoggerService } from '@nestjs/common';
import { LOOP_FAILED, LOOP_RECOVERED } from '../pg-queue.messages.js';
import { errorLine } from './error-text.js';

/**
 * Failure bookkeeping for a background loop (claim, listener, heartbeat, outcome writer, maintenance):
 * exponential backoff between tries, one log line when an outage starts and one when it ends,
 * not one per tick.
 */
export class RetryBackoff {
  private failures = 0;
  private downSince = 0;

  constructor(
    private readonly what: string,
    private readonly logger: Pick<LoggerService, 'warn' | 'log'>,
    private readonly minMs = 100,
    private readonly maxMs = 10_000,
  ) {}

  get failing(): boolean {
    return this.failures > 0;
  }

  /** Records a failure; returns how long to wait before the next try. */
  failed(error: unknown): number {
    this.failures += 1;
    const delay = Math.min(this.maxMs, this.minMs * 2 ** (this.failures - 1)) * (0.8 + Math.random() * 0.4);
    if (this.failures === 1) {
      this.downSince = Date.now();
      this.logger.warn(LOOP_FAILED(this.what, errorLine(error), Math.round(delay)));
    }
    return Math.round(delay);
  }

  succeeded(): void {
    if (this.failures === 0) return;
    this.logger.log(LOOP_RECOVERED(this.what, this.failures, Date.now() - this.downSince));
    this.failures = 0;
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A backoff wait that can be cut short: `wake()` ends it at once (LISTEN is back, shutdown) and clears the timer. */
export function wakeableSleep(ms: number): { done: Promise<void>; wake: () => void } {
  let wake!: () => void;
  const done = new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    wake = () => {
      clearTimeout(timer);
      resolve();
    };
  });
  return { done, wake };
}

/** Waits for work, at most ms; the timer is cleared either way so it never holds the process open. */
export async function withDeadline(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** The work's result, or a rejection once ms have passed (the work itself goes on; its result is then ignored). */
export async function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms)));
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
