import type { LoggerService } from '@nestjs/common';
import type { JobStore } from '../store/job.store.js';
import { RetryBackoff } from '../utils/retry-backoff.js';
import type { RowLockLane } from './row-lock-lane.js';

/** What the heartbeat renews: one attempt of one job, told when the row turns out to be no longer ours. */
export interface LeaseHolder {
  readonly id: string;
  readonly attempt: number;
  leaseLost(): void;
}

/**
 * Renews the leases of every job this process holds, all queues at once, in one statement per heartbeat.
 * A job the statement does not return is no longer ours (swept after a freeze, cancelled): its handler is
 * told through leaseLost(), and its outcome will be fenced out anyway.
 */
export class LeaseKeeper {
  private readonly held = new Map<string, LeaseHolder>();
  private timer: NodeJS.Timeout | undefined;
  private beating = false;
  private readonly backoff: RetryBackoff;
  private skipUntil = 0;

  constructor(
    private readonly store: JobStore,
    private readonly workerId: string,
    private readonly leaseMs: number,
    private readonly heartbeatMs: number,
    private readonly logger: LoggerService,
    private readonly lane: RowLockLane,
  ) {
    this.backoff = new RetryBackoff('lease heartbeat', logger, heartbeatMs, leaseMs);
  }

  start(): void {
    this.timer ??= setInterval(() => void this.beat(), this.heartbeatMs);
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  hold(holder: LeaseHolder): void {
    this.held.set(holder.id, holder);
  }

  /**
   * Only that attempt's hold: a stalled process may already hold a later attempt of the same job (swept and
   * claimed again), and the stale attempt's release, landing after, must not stop the new one's heartbeat.
   */
  release(id: string, attempt: number): void {
    if (this.held.get(id)?.attempt === attempt) this.held.delete(id);
  }

  /** One heartbeat; exposed for tests. */
  async beat(): Promise<void> {
    if (this.beating || this.held.size === 0 || Date.now() < this.skipUntil) return;
    this.beating = true;
    let sent: LeaseHolder[] = [];
    try {
      // The list is taken inside the lane, after any outcome batch ahead of it has landed and released its jobs.
      const renewed = await this.lane.run(() => {
        sent = [...this.held.values()];
        return sent.length ? this.store.extendLeases(this.workerId, this.leaseMs, sent) : Promise.resolve(new Set<string>());
      });
      this.backoff.succeeded();
      for (const held of sent) {
        const { id } = held;
        // Still the same attempt in our map and not renewed: the row moved on without us.
        if (!renewed.has(id) && this.held.get(id) === held) {
          this.held.delete(id);
          held.leaseLost();
        }
      }
    } catch (error) {
      this.skipUntil = Date.now() + this.backoff.failed(error);
    } finally {
      this.beating = false;
    }
  }
}
