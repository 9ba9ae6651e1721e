import type { LoggerService } from '@nestjs/common';
import { WAKE_UP_FAILED, WAKE_UPS_DROPPED } from '../pg-queue.messages.js';
import type { Wake } from '../store/shared.sql.js';
import { errorLine } from '../utils/error-text.js';
import { RetryBackoff, wakeableSleep, withDeadline } from '../utils/retry-backoff.js';

/** How long close() waits for wake-ups still to send. */
const CLOSE_DEADLINE_MS = 2_000;

/**
 * Least time from one wake-up to the next, so that one statement carries every enqueue of its interval (sent
 * back to back, each carried one or two: docs/performance.md, Concurrent enqueue). A job waits at most this
 * long more for its wake-up; the first after a quiet spell goes at once.
 */
export const WAKE_SPACING_MS = 2;

/**
 * Sends the NOTIFY of QueueService's own autocommit enqueues after their insert committed, instead of the
 * table's trigger inside the insert's transaction. PostgreSQL serialises the commits of every transaction that
 * called pg_notify behind one database-wide lock held until its commit record is flushed, so 16 concurrent
 * enqueuers each waiting for the others' WAL flushes reached under half the rate of the same inserts without
 * NOTIFY; here the inserts commit in parallel (group commit), and the NOTIFY comes from a transaction that
 * writes no WAL, so it commits without a flush and holds that lock for microseconds.
 *
 * Coalesced: at most one send in flight; queues enqueued meanwhile ride the next one, as one statement for
 * all of them. A failed send is retried with backoff and never fails an enqueue (the job is stored; the
 * workers' poll finds it if the wake-up never comes). No Nest imports beyond types: testable alone.
 */
export class WakeSender {
  private readonly pending = new Set<string>();
  private sending: Promise<void> | undefined;
  private closed = false;
  /** This process's enqueues (without a manager) whose insert is in flight: see begin(). */
  private inserting = 0;
  /** Set while sends fail: one log line when the outage starts (naming the queues) and one when it ends. */
  private backoff: RetryBackoff | undefined;
  private cutSleepShort: (() => void) | undefined;
  /** performance.now() when the last send started. */
  private lastSentAt = -Infinity;

  constructor(
    private readonly connection: { send(queues: string[]): Promise<void>; close(): Promise<void> },
    private readonly logger: Pick<LoggerService, 'warn' | 'log'>,
    private readonly backoffMs: { min: number; max: number } = { min: 100, max: 5_000 },
    private readonly spacingMs = WAKE_SPACING_MS,
  ) {}

  /** False once closed: an enqueue then keeps the trigger's wake-up, sent at its commit. */
  get open(): boolean {
    return !this.closed;
  }

  /**
   * Called as an enqueue's insert starts (end() when it is done): whether it leaves its wake-up to this sender.
   * Only while another enqueue of this process is in flight: a lone one keeps the trigger's NOTIFY, one
   * statement as before (it has no commit of this process to queue behind, and a wake-up of its own would
   * double the statements of a producer that enqueues one job at a time).
   */
  begin(): Wake {
    this.inserting += 1;
    return this.inserting > 1 && !this.closed ? 'deferred' : 'trigger';
  }

  end(): void {
    this.inserting -= 1;
  }

  /** Wakes the workers of these queues, in every process, as soon as the send in flight (if any) is done. */
  wake(queues: Iterable<string>): void {
    for (const queue of queues) this.pending.add(queue);
    if (this.pending.size > 0) this.sending ??= this.sendAll();
  }

  /** Resolves once every wake-up asked for so far is sent (or given up at close). */
  async flush(): Promise<void> {
    while (this.sending) await this.sending;
  }

  /** Sends what is pending (for up to CLOSE_DEADLINE_MS, without retries), then sends nothing more. */
  async close(): Promise<void> {
    this.closed = true;
    this.cutSleepShort?.();
    await withDeadline(this.flush(), CLOSE_DEADLINE_MS);
    await this.connection.close();
  }

  /** Nest calls it: after the workers drained (their handlers may enqueue). */
  async onApplicationShutdown(): Promise<void> {
    await this.close();
  }

  private async sendAll(): Promise<void> {
    while (this.pending.size > 0) {
      const early = this.lastSentAt + this.spacingMs - performance.now();
      if (early > 0 && !this.closed) await this.sleep(early);
      this.lastSentAt = performance.now();
      const queues = [...this.pending];
      this.pending.clear();
      try {
        await this.connection.send(queues);
        this.backoff?.succeeded();
        this.backoff = undefined;
      } catch (error) {
        if (this.closed) {
          this.logger.warn(WAKE_UPS_DROPPED([...new Set([...queues, ...this.pending])], errorLine(error)));
          this.pending.clear();
          break;
        }
        for (const queue of queues) this.pending.add(queue);
        this.backoff ??= new RetryBackoff(WAKE_UP_FAILED(queues), this.logger, this.backoffMs.min, this.backoffMs.max);
        await this.sleep(this.backoff.failed(error));
      }
    }
    this.sending = undefined;
  }

  /** A wait that close() cuts short. */
  private async sleep(ms: number): Promise<void> {
    const sleep = wakeableSleep(ms);
    this.cutSleepShort = sleep.wake;
    await sleep.done;
    this.cutSleepShort = undefined;
  }
}
