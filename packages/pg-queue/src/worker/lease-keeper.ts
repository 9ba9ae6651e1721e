import type { LoggerService } from '@nestjs/common';
import type { JobStore } from '../store/job.store.js';
import type { LogEntry } from '../store/job-store.types.js';
import { RetryBackoff } from '../utils/retry-backoff.js';
import type { HeldJob } from './held-job.js';
import type { RowLockLane } from './row-lock-lane.js';

/** What one beat sends: started jobs to renew, buffered jobs to check. */
export interface BeatLoad {
  started: HeldJob[];
  buffered: HeldJob[];
  /** performance.now() when the beat's statement was sent: the leases it renews run from then at the latest. */
  sentAt: number;
}

/** The jobs the heartbeat is about (the worker pool, over its queues' workers), and where its answers go. */
export interface LeaseHolders {
  /**
   * Fills `load` for a beat. `full`: every started job (running or settling) and every buffered one. Otherwise
   * a quick beat: the buffered jobs of workers waiting on a check. (A job started from the buffer is told to its
   * row by its start mark before its handler is called, never by a beat: QueueWorker.pump.)
   */
  collect(full: boolean, load: BeatLoad): void;
  /** The beat numbered `seq` answered: `kept` holds the ids still this process's; any other id sent is not. */
  answered(load: BeatLoad, kept: Set<string>, seq: number): void;
  /** A beat failed (the database unreachable or refusing). */
  failed(): void;
}

/**
 * Renews the leases of every job this process runs, all queues at once, in one statement per heartbeat, and
 * checks the jobs it holds in its buffers in the same statement. A job the statement does not return is no
 * longer this process's (swept after a freeze, cancelled, replaced, given back for a paused queue): the answer
 * goes to the workers as one batch (LeaseHolders.answered), which apply it to every job before refilling a slot.
 *
 * Besides the regular beat every heartbeatMs, a quick beat (the same statement, a smaller load) runs at once
 * when a worker asks for a check (a pause or replace notice, a cancel burst, after a failure). Beats never overlap: one asked for while another is in
 * flight runs right after it. Beats are numbered, so a worker can tell a check sent after its question from
 * one that was already on its way.
 *
 * After a failed beat the next try comes sooner, not later: at most a quarter of the slack between beats and
 * lease (min(heartbeatMs, leaseMs - heartbeatMs) / 4 apart), so a database back before the leases expire
 * renews them. Backing off up to leaseMs instead let two failed beats schedule the next one past the lease.
 *
 * Progress (job.progress()) rides the beat: the last value each job gave since the previous beat goes in the
 * same statement, so a handler reporting progress in a tight loop costs at most one row write per heartbeat. So do
 * the lines handlers logged (job.log()) since the previous beat: a job that dies between two beats keeps the lines
 * the last one wrote.
 */
export class LeaseKeeper {
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private beating = false;
  /** A beat asked for while one was in flight: run when it lands (true: a full one). */
  private queued: boolean | undefined;
  private seq = 0;
  private readonly backoff: RetryBackoff;

  constructor(
    private readonly store: JobStore,
    private readonly workerId: string,
    private readonly leaseMs: number,
    private readonly heartbeatMs: number,
    private readonly logger: LoggerService,
    private readonly lane: RowLockLane,
    private readonly holders: LeaseHolders,
  ) {
    const retryCapMs = Math.max(50, Math.floor(Math.min(heartbeatMs, leaseMs - heartbeatMs) / 4));
    this.backoff = new RetryBackoff('lease heartbeat', logger, Math.min(100, retryCapMs), retryCapMs);
  }

  /** The number the next beat will carry: a check asked for now is answered by a beat of this number or later. */
  get nextSeq(): number {
    return this.seq + 1;
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

  /** A worker waits on a check of its buffer: a quick beat now. */
  checkNow(): void {
    if (!this.started) return;
    queueMicrotask(() => void this.run(false));
  }

  private next(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.run(true), delayMs);
  }

  /** Runs a beat (or queues it behind the one in flight), then arms what follows it. */
  private async run(full: boolean): Promise<void> {
    if (this.beating) {
      this.queued = (this.queued ?? false) || full;
      return;
    }
    const failedRetryMs = await this.beat(full);
    if (!this.started) return;
    if (failedRetryMs !== undefined) {
      this.next(failedRetryMs); // a failed beat of any kind is retried as a full one
    } else if (full) {
      this.next(this.heartbeatMs);
    }
    const queued = this.queued;
    this.queued = undefined;
    if (queued !== undefined) void this.run(queued);
  }

  /** One heartbeat (exposed for tests); resolves to the retry delay when it failed. */
  async beat(full = true): Promise<number | undefined> {
    if (this.beating) return undefined;
    this.beating = true;
    const load: BeatLoad = { started: [], buffered: [], sentAt: 0 };
    const progress: [string, string][] = [];
    let logs: [string, LogEntry][] | undefined;
    let logged: [HeldJob, number][] | undefined;
    let seq = 0;
    try {
      // The load is taken inside the lane, after any outcome batch ahead of it has landed.
      const kept = await this.lane.run(() => {
        this.holders.collect(full, load);
        seq = ++this.seq;
        if (load.started.length === 0 && load.buffered.length === 0) return Promise.resolve(new Set<string>());
        for (const job of load.started) {
          if (job.progressJson !== undefined) progress.push([job.id, job.progressJson]);
          // Lines logged since the last beat (job.log()); a beat in which no job logged sends the statement it always did.
          const pending = job.pendingLogs();
          if (pending !== undefined) {
            (logs ??= []).push([job.id, pending.entry]);
            (logged ??= []).push([job, pending.upTo]);
          }
        }
        load.sentAt = performance.now();
        return this.store.extendLeases(this.workerId, this.leaseMs, load.started, progress, load.buffered, logs);
      });
      this.backoff.succeeded();
      // Lines written: forgotten up to the last one sent (a line logged while the beat was in flight waits for the next).
      if (logged !== undefined) for (const [job, upTo] of logged) if (kept.has(job.id)) job.logsWritten(upTo);
      // Progress written, unless the handler gave a newer value while the beat was in flight (the next beat takes it).
      let i = 0;
      for (const job of load.started) {
        if (i < progress.length && progress[i][0] === job.id) {
          if (job.progressJson === progress[i][1]) job.progressJson = undefined;
          i += 1;
        }
      }
      this.holders.answered(load, kept, seq);
      return undefined;
    } catch (error) {
      this.holders.failed();
      return this.backoff.failed(error);
    } finally {
      this.beating = false;
    }
  }
}
