import type { Pool } from 'pg';
import { inTransaction } from './in-transaction.js';
import { Statements } from './statements.js';
import {
  createPartition, detachPartition, dropPartition, HISTORY_SQL, partitionName,
  type HistoryKind, type HistoryPartitionWidth,
} from './history.sql.js';

/** A history partition as the catalog describes it. */
export interface HistoryPartition {
  name: string;
  kind: HistoryKind;
  /** Its rows finished before this (exclusive). */
  upper: Date;
  /** A DETACH ... CONCURRENTLY of it was interrupted: it is finished before the partition is dropped. */
  detachPending: boolean;
  /** The database's clock when the list was read (retention is measured by it). */
  now: Date;
}

interface CandidateRow {
  id: string;
  finished_at: string;
  kind: HistoryKind;
  suffix: string;
  lower: string;
  upper: string;
}

/** Partitioned history's table access (history.sql.ts), on the queue's own pool. */
export class HistoryStore {
  private readonly statements: Statements<Omit<typeof HISTORY_SQL, 'forgetPartitionAttempts'>>;
  /** Partitions known to exist, so that a pass makes only the missing ones; forgotten when one is dropped. */
  private readonly known = new Set<string>();
  private version: number | undefined;

  constructor(
    private readonly pool: Pool,
    options: { transactionPooler?: boolean } = {},
  ) {
    const { forgetPartitionAttempts: _, ...statements } = HISTORY_SQL;
    this.statements = new Statements(pool, statements, 'pgq_history_', options);
  }

  /**
   * One batch of the mover: up to `limit` jobs that finished more than `afterMs` ago leave background_jobs for
   * history, their partitions made first when missing. `held` false: another instance's mover holds the turn.
   */
  async moveBatch(
    width: HistoryPartitionWidth,
    afterMs: number,
    limit: number,
    retention: { completedMs: number; failedMs: number | null },
  ): Promise<{ held: boolean; moved: number; read: number }> {
    const candidates = await this.statements.rows<CandidateRow>('moveCandidates', [afterMs, limit, width, retention.completedMs, retention.failedMs]);
    if (candidates.length === 0) return { held: true, moved: 0, read: 0 };
    const wanted = new Map<string, CandidateRow>();
    for (const c of candidates) wanted.set(partitionName(c.kind, c.suffix), c);
    if ([...wanted.keys()].some((name) => !this.known.has(name))) await this.refreshKnown();
    for (const [name, c] of wanted) {
      if (this.known.has(name)) continue;
      try {
        await this.inTransaction(createPartition(c.kind, name, c.lower, c.upper));
      } catch (error) {
        // Another instance's mover made it meanwhile (its attach won): nothing to do.
        await this.refreshKnown();
        if (!this.known.has(name)) throw error;
      }
      this.known.add(name);
    }
    const values = [candidates.map((c) => c.id), candidates.map((c) => c.finished_at), retention.completedMs, retention.failedMs];
    let row: { held: boolean; moved: number };
    try {
      [row] = await this.statements.rows<{ held: boolean; moved: number }>('moveJobs', values);
    } catch (error) {
      // 23514: a partition this instance knew of was dropped meanwhile (the pruner, here or elsewhere, at the moment
      // its jobs passed retention). The statement moved nothing; the next pass reads the partitions again.
      if ((error as { code?: string }).code === '23514') this.known.clear();
      throw error;
    }
    return { held: row.held, moved: row.moved, read: candidates.length };
  }

  /** Every partition of both kinds, oldest first. */
  async partitions(): Promise<HistoryPartition[]> {
    const rows = await this.statements.rows<{ name: string; kind: HistoryKind; upper: Date; detach_pending: boolean; now: Date }>('partitions', []);
    return rows.map((r) => ({ name: r.name, kind: r.kind, upper: r.upper, detachPending: r.detach_pending, now: r.now }));
  }

  /**
   * Drops a partition: its jobs' attempt history first, then DETACH (CONCURRENTLY on PostgreSQL 14+) and DROP.
   * Two instances may try the same partition: the one that finds it gone already has nothing to do.
   */
  async drop(partition: HistoryPartition): Promise<void> {
    this.known.delete(partition.name);
    const version = await this.serverVersion();
    if (!partition.detachPending) await this.pool.query(HISTORY_SQL.forgetPartitionAttempts(partition.name));
    if (version >= 140000) {
      await this.pool.query(detachPartition(partition.kind, partition.name, partition.detachPending ? 'finalize' : 'concurrently'));
    } else {
      await this.inTransaction(detachPartition(partition.kind, partition.name, 'locked'));
    }
    await this.pool.query(dropPartition(partition.name));
  }

  /** Finishes a DETACH ... CONCURRENTLY that was interrupted (PostgreSQL 14+), keeping the table. */
  async finishDetach(partition: HistoryPartition): Promise<void> {
    this.known.delete(partition.name);
    await this.pool.query(detachPartition(partition.kind, partition.name, 'finalize'));
  }

  /** `statements` (several, separated by semicolons: their SET LOCAL holds for the rest) in one transaction. */
  private async inTransaction(statements: string): Promise<void> {
    await inTransaction(this.pool, (client) => client.query(statements));
  }

  private async refreshKnown(): Promise<void> {
    this.known.clear();
    for (const p of await this.partitions()) this.known.add(p.name);
  }

  private async serverVersion(): Promise<number> {
    this.version ??= (await this.statements.rows<{ version: number }>('serverVersion', []))[0].version;
    return this.version;
  }
}
