import type { LoggerService } from '@nestjs/common';
import type { HistoryStore } from '../store/history.store.js';
import type { JobStore } from '../store/job.store.js';

export interface PrunerConfig {
  /** Completed jobs are deleted this long after they finished. */
  completedRetentionMs: number;
  /** Failed and cancelled jobs likewise; null keeps them. */
  failedRetentionMs: number | null;
  /** Recorded events are deleted this long after they were written (undefined: kept). */
  eventRetentionMs?: number;
  /** Rows per DELETE statement. */
  batchSize: number;
  /** Upper bound of statements per pass, so one pass never runs for minutes; the next pass continues. */
  maxBatchesPerPass: number;
}

export interface PruneResult {
  ran: boolean;
  completed: number;
  failed: number;
  /** History partitions dropped whole (README: "Long retention: partitioned history"). */
  partitions: number;
}

/**
 * Deletes finished jobs past their retention: in background_jobs in short batches, on one instance at a time; in the
 * partitioned history by dropping whole partitions (whether or not history is on: with it turned off, what it holds
 * ages out so).
 */
export class Pruner {
  constructor(
    private readonly store: JobStore,
    private readonly config: PrunerConfig,
    private readonly logger: LoggerService,
    private readonly history?: HistoryStore,
  ) {}

  /** `stop` (aborted at shutdown) ends the pass between batches. */
  async runOnce(stop?: AbortSignal): Promise<PruneResult> {
    const completed = await this.prune(['completed'], this.config.completedRetentionMs, stop);
    const failed = this.config.failedRetentionMs === null ? { ran: true, deleted: 0 } : await this.prune(['failed', 'cancelled'], this.config.failedRetentionMs, stop);
    if (completed.deleted + failed.deleted > 0) {
      this.logger.log(`pruner: deleted ${completed.deleted} completed and ${failed.deleted} failed/cancelled job(s) past retention`);
    }
    // On the instance that holds the pruner's turn only; two at once would be correct, just redundant.
    const partitions = completed.ran && !stop?.aborted ? await this.dropExpiredPartitions(stop) : 0;
    if (completed.ran && !stop?.aborted) await this.pruneExpiredKeys();
    if (completed.ran && !stop?.aborted) await this.pruneFinishedFlows();
    if (completed.ran && !stop?.aborted) await this.pruneEvents(stop);
    return { ran: completed.ran && failed.ran, completed: completed.deleted, failed: failed.deleted, partitions };
  }

  /**
   * History partitions whose every row is past its kind's retention: dropped whole (DETACH CONCURRENTLY, DROP), so
   * retention leaves no dead rows behind. A partition's upper bound is its newest possible finish time.
   *
   * A partition whose DETACH ... CONCURRENTLY was interrupted (its pruner died or lost its connection while the
   * detach waited for older transactions) must be finished before any other partition of its kind can be detached
   * (PostgreSQL allows one pending detach per table); its rows have been out of every new read of history since. Past
   * retention, it is finished and dropped like any other. Not past it (the retention was raised since, or an operator
   * began the detach), the detach is finished and the table kept, with a warning: nothing is deleted early.
   */
  async dropExpiredPartitions(stop?: AbortSignal): Promise<number> {
    if (!this.history) return 0;
    let dropped = 0;
    for (const partition of await this.history.partitions()) {
      if (stop?.aborted) break;
      const retentionMs = partition.kind === 'completed' ? this.config.completedRetentionMs : this.config.failedRetentionMs;
      const expired = retentionMs !== null && partition.upper.getTime() <= partition.now.getTime() - retentionMs;
      if (!expired && partition.detachPending) {
        await this.history.finishDetach(partition);
        this.logger.warn(
          `pruner: finished the interrupted detach of history partition ${partition.name}; its jobs are not past retention, so its table is kept, no longer part of history: attach it back or drop it`,
        );
        continue;
      }
      if (!expired) continue;
      await this.history.drop(partition);
      dropped++;
      this.logger.log(`pruner: dropped history partition ${partition.name} (${partition.kind} jobs that finished before ${partition.upper.toISOString()})`);
    }
    return dropped;
  }

  /** uniqueForMs windows that ended: their rows are no longer needed (a new enqueue would take them anyway). */
  async pruneExpiredKeys(): Promise<number> {
    let deleted = 0;
    for (let i = 0; i < this.config.maxBatchesPerPass; i++) {
      const batch = await this.store.deleteExpiredJobKeys(this.config.batchSize);
      deleted += batch;
      if (batch < this.config.batchSize) break;
    }
    return deleted;
  }

  /** Flows whose jobs are all pruned: their rows and edges. */
  async pruneFinishedFlows(): Promise<number> {
    let deleted = 0;
    for (let i = 0; i < this.config.maxBatchesPerPass; i++) {
      const batch = await this.store.flows.deleteFinishedFlows(this.config.completedRetentionMs, this.config.batchSize);
      deleted += batch;
      if (batch < this.config.batchSize) break;
    }
    return deleted;
  }

  /**
   * Recorded events past eventRetentionMs (README: "Event stream"), in batches. A consumer that resumes after an
   * event pruned meanwhile goes on from the oldest event kept: what it missed is gone.
   */
  async pruneEvents(stop?: AbortSignal): Promise<number> {
    if (this.config.eventRetentionMs === undefined) return 0;
    let deleted = 0;
    for (let i = 0; i < this.config.maxBatchesPerPass && !stop?.aborted; i++) {
      const batch = await this.store.events.deleteBefore(this.config.eventRetentionMs, this.config.batchSize);
      deleted += batch;
      if (batch < this.config.batchSize) break;
    }
    return deleted;
  }

  /** The longest retention of any finished job (null: failed jobs are kept for ever). */
  private flowRetentionMs(): number | null {
    const { completedRetentionMs, failedRetentionMs } = this.config;
    return failedRetentionMs === null ? null : Math.max(completedRetentionMs, failedRetentionMs);
  }

  private async prune(statuses: ('completed' | 'failed' | 'cancelled')[], retentionMs: number, stop?: AbortSignal): Promise<{ ran: boolean; deleted: number }> {
    let deleted = 0;
    for (let i = 0; i < this.config.maxBatchesPerPass && !stop?.aborted; i++) {
      // A flow's jobs go together, after the longest retention among them (a failed flow keeps its completed jobs as
      // long as its failed ones, so that a retry finds its parents).
      const batch = await this.store.deleteFinishedBefore(statuses, retentionMs, this.config.batchSize, this.flowRetentionMs());
      if (!batch.held) return { ran: false, deleted };
      deleted += batch.deleted;
      if (batch.deleted < this.config.batchSize) break;
    }
    return { ran: true, deleted };
  }
}
