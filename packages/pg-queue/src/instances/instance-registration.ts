import type { LoggerService } from '@nestjs/common';
import { hostname } from 'node:os';
import { INSTANCE_DEREGISTER_FAILED } from '../pg-queue.messages.js';
import type { InstanceQueue, InstanceStore } from '../store/instance.store.js';
import { errorLine } from '../utils/error-text.js';
import { RetryBackoff } from '../utils/retry-backoff.js';

/**
 * This process's row in the instances registry (README: "Instances"), written every `everyMs` (the heartbeat
 * interval) with its queues and what runs in each, and deleted at shutdown. A statement of its own rather than a
 * part of the lease heartbeat: that one is sent only while jobs are held, and an idle instance must show too. The
 * row expires `expiresInMs` after each write (leaseMs + heartbeatMs: by then the jobs of a process that stopped
 * writing have lapsed too), so a process that dies or freezes reads as gone without anyone's help. A failed write is
 * logged once per outage and retried with backoff; it never stops the workers.
 */
export class InstanceRegistration {
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private stopped = false;
  private readonly backoff: RetryBackoff;

  constructor(
    private readonly store: InstanceStore,
    private readonly id: string,
    private readonly everyMs: number,
    private readonly expiresInMs: number,
    private readonly queues: () => InstanceQueue[],
    private readonly logger: LoggerService,
  ) {
    this.backoff = new RetryBackoff('instance registration', logger, Math.min(1_000, everyMs), everyMs);
  }

  start(): void {
    this.stopped = false;
    this.write();
  }

  /** Writes the row now (after a change worth showing at once), unless a write is in flight. */
  private write(): void {
    if (this.stopped || this.inFlight) return;
    clearTimeout(this.timer);
    this.inFlight = this.store.register(this.id, hostname(), process.pid, this.queues(), this.expiresInMs).then(
      () => {
        this.backoff.succeeded();
        this.next(this.everyMs);
      },
      (error: unknown) => this.next(this.backoff.failed(error)),
    );
  }

  private next(delayMs: number): void {
    this.inFlight = undefined;
    if (this.stopped) return;
    this.timer = setTimeout(() => this.write(), delayMs);
  }

  /** Stops writing and deletes the row (after the workers drained: until then the process still runs jobs). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.inFlight;
    try {
      await this.store.deregister(this.id);
    } catch (error) {
      this.logger.warn(INSTANCE_DEREGISTER_FAILED(this.id, errorLine(error)));
    }
  }
}
