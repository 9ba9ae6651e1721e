import type { LoggerService } from '@nestjs/common';
import type { JobRef, JobStore } from '../store/job.store.js';
import { RetryBackoff } from '../utils/retry-backoff.js';
import type { RowLockLane } from './row-lock-lane.js';

/** What the heartbeat renews: one claim of one job, told when the row turns out to be no longer ours. */
export interface LeaseHolder extends JobRef {
  /** Progress (JSON text) given since the last write: the beat carries it and clears it once written. */
  progressJson: string | undefined;
  leaseLost(): void;
}

/**
 * Renews the leases of every job this process holds, all queues at once, in one statement per heartbeat.
 * A job the statement does not return is no longer ours (swept after a freeze, cancelled): its handler is
 * told through leaseLost(), and its outcome will be fenced out anyway.
 *
 * After a failed beat the next try comes sooner, not later: at most a quarter of the slack between beats and
 * lease (min(heartbeatMs, leaseMs - heartbeatMs) / 4 apart), so a database back before the leases expire
 * renews them. Backing off up to leaseMs instead let two failed beats schedule the next one past the lease.
 *
 * Progress (job.progress()) rides the beat: the last value each job gave since the previous beat goes in the
 * same statement, so a handler reporting progress in a tight loop costs at most one row write per heartbeat.
 */
export class LeaseKeeper {
  private readonly held = new Map<string, LeaseHolder>();
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private beating = false;
  private readonly backoff: RetryBackoff;

  constructor(
    private readonly store: JobStore,
    private readonly workerId: string,
    private readonly leaseMs: number,
    private readonly heartbeatMs: number,
    private readonly logger: LoggerService,
    private readonly lane: RowLockLane,
  ) {
    const retryCapMs = Math.max(50, Math.floor(Math.min(heartbeatMs, leaseMs - heartbeatMs) / 4));
    this.backoff = new RetryBackoff('lease heartbeat', logger, Math.min(100, retryCapMs), retryCapMs);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.next(this.heartbeatMs);
  }

  stop(): void {
    this.started = false;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private next(delayMs: number): void {
    this.timer = setTimeout(() => {
      void this.beat().then((retryInMs) => {
        if (this.started) this.next(retryInMs ?? this.heartbeatMs);
      });
    }, delayMs);
  }

  hold(holder: LeaseHolder): void {
    this.held.set(holder.id, holder);
  }

  /**
   * Only that claim's hold: a stalled process may already hold a later claim of the same job (swept and
   * claimed again), and the stale claim's release, landing after, must not stop the new one's heartbeat.
   */
  release(id: string, token: string): void {
    if (this.held.get(id)?.token === token) this.held.delete(id);
  }

  /** One heartbeat (exposed for tests); resolves to the retry delay when it failed. */
  async beat(): Promise<number | undefined> {
    if (this.beating || this.held.size === 0) return undefined;
    this.beating = true;
    let sent: LeaseHolder[] = [];
    const progress: [string, string][] = [];
    try {
      // The list is taken inside the lane, after any outcome batch ahead of it has landed and released its jobs.
      const renewed = await this.lane.run(() => {
        sent = [...this.held.values()];
        for (const held of sent) if (held.progressJson !== undefined) progress.push([held.id, held.progressJson]);
        return sent.length ? this.store.extendLeases(this.workerId, this.leaseMs, sent, progress) : Promise.resolve(new Set<string>());
      });
      this.backoff.succeeded();
      let i = 0;
      for (const held of sent) {
        // Written, unless the handler gave a newer value while the beat was in flight (the next beat takes it).
        if (i < progress.length && progress[i][0] === held.id) {
          if (held.progressJson === progress[i][1]) held.progressJson = undefined;
          i += 1;
        }
        const { id } = held;
        // Still the same attempt in our map and not renewed: the row moved on without us.
        if (!renewed.has(id) && this.held.get(id) === held) {
          this.held.delete(id);
          held.leaseLost();
        }
      }
      return undefined;
    } catch (error) {
      return this.backoff.failed(error);
    } finally {
      this.beating = false;
    }
  }
}
