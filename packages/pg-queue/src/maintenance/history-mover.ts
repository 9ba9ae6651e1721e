import type { LoggerService } from '@nestjs/common';
import type { HistoryPartitionWidth } from '../store/history.sql.js';
import type { HistoryStore } from '../store/history.store.js';

export interface HistoryMoverConfig {
  partitionWidth: HistoryPartitionWidth;
  /** A finished job moves once it finished this long ago. */
  moveAfterMs: number;
  /** Rows per statement. */
  batchSize: number;
  /** Upper bound of statements per pass; the next pass goes on. */
  maxBatchesPerPass: number;
  /** The pruner's retentions: a job already past its kind's is left where it is, for the pruner to delete. */
  completedRetentionMs: number;
  failedRetentionMs: number | null;
}

/**
 * Moves finished jobs from background_jobs to the partitioned history (README: "Long retention: partitioned
 * history"), in short batches that lock only the rows they move, on one instance at a time. The same passes move
 * the finished rows of an existing table when history is turned on: that is the online migration.
 */
export class HistoryMover {
  constructor(
    private readonly store: HistoryStore,
    private readonly config: HistoryMoverConfig,
    private readonly logger: LoggerService,
  ) {}

  /** `stop` (aborted at shutdown) ends the pass between batches. */
  async runOnce(stop?: AbortSignal): Promise<{ ran: boolean; moved: number }> {
    let moved = 0;
    for (let i = 0; i < this.config.maxBatchesPerPass && !stop?.aborted; i++) {
      const batch = await this.store.moveBatch(this.config.partitionWidth, this.config.moveAfterMs, this.config.batchSize, {
        completedMs: this.config.completedRetentionMs,
        failedMs: this.config.failedRetentionMs,
      });
      if (!batch.held) return { ran: false, moved };
      moved += batch.moved;
      // A short batch was the last; a full one that moved nothing was all held by other transactions: next pass.
      if (batch.read < this.config.batchSize || batch.moved === 0) break;
    }
    if (moved > 0) this.logger.debug?.(`history: moved ${moved} finished job(s) out of background_jobs`);
    return { ran: true, moved };
  }
}
