import type { Pool } from 'pg';
import { inTransaction } from './in-transaction.js';
import { Statements } from './statements.js';
import { ADVISORY_LOCK } from '../pg-queue.constants.js';
import {
  createPartition, detachPartition, dropPartition, HISTORY_SQL, newPartitionRange, partitionBound, partitionName, partitionSuffix,
  type HistoryKind, type HistoryPartitionWidth, type PartitionRange,
} from './history.sql.js';

/** A history partition as the catalog describes it. */
export interface HistoryPartition {
  name: string;
  kind: HistoryKind;
  /** Its rows finished at or after this. */
  lower: Date;
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
  /** finished_at, ms since the epoch (with its microseconds as a fraction). */
  at_ms: number;
  /** The range of the mover's width around finished_at (UTC), as the DDL writes a bound. */
  lower: string;
  upper: string;
}

interface KnownPartition extends PartitionRange {
  name: string;
  kind: HistoryKind;
}

interface PartitionRow {
  name: string;
  kind: HistoryKind;
  lower: Date;
  upper: Date;
  detach_pending: boolean;
  now: Date;
}

function toPartition(r: PartitionRow): HistoryPartition {
  return { name: r.name, kind: r.kind, lower: r.lower, upper: r.upper, detachPending: r.detach_pending, now: r.now };
}

function knownPartition(p: HistoryPartition): KnownPartition {
  return { name: p.name, kind: p.kind, lower: p.lower.getTime(), upper: p.upper.getTime() };
}

/** Partitioned history's table access (history.sql.ts), on the queue's own pool. */
export class HistoryStore {
  private readonly statements: Statements<Omit<typeof HISTORY_SQL, 'forgetPartitionAttempts'>>;
  /**
   * Partitions known to exist, with their bounds, so that a pass makes only the missing ones; forgotten when one is
   * dropped. A row is covered by the partition whose bounds hold its finish time, whatever width made it: never by
   * name (a day partition and a week one starting the same Monday have the same name).
   */
  private known: KnownPartition[] = [];
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
    const covered = (c: CandidateRow) => this.known.some((p) => p.kind === c.kind && p.lower <= c.at_ms && c.at_ms < p.upper);
    if (!candidates.every(covered)) await this.refreshKnown();
    for (const c of candidates) {
      if (covered(c)) continue;
      try {
        await this.makePartitionFor(width, c);
      } catch (error) {
        // The attach failed (a lock_timeout, a table of that name left behind): the next pass reads the partitions again.
        this.known = [];
        throw error;
      }
    }
    const values = [candidates.map((c) => c.id), candidates.map((c) => c.finished_at), retention.completedMs, retention.failedMs];
    let row: { held: boolean; moved: number };
    try {
      [row] = await this.statements.rows<{ held: boolean; moved: number }>('moveJobs', values);
    } catch (error) {
      // 23514: a partition this instance knew of was dropped meanwhile (the pruner, here or elsewhere, at the moment
      // its jobs passed retention). The statement moved nothing; the next pass reads the partitions again.
      if ((error as { code?: string }).code === '23514') this.known = [];
      throw error;
    }
    return { held: row.held, moved: row.moved, read: candidates.length };
  }

  /** Every partition of both kinds, oldest first. */
  async partitions(): Promise<HistoryPartition[]> {
    const rows = await this.statements.rows<PartitionRow>('partitions', []);
    return rows.map(toPartition);
  }

  /**
   * Drops a partition: its jobs' attempt history first, then DETACH (CONCURRENTLY on PostgreSQL 14+) and DROP.
   * Two instances may try the same partition: the one that finds it gone already has nothing to do.
   */
  async drop(partition: HistoryPartition): Promise<void> {
    this.forget(partition.name);
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
    this.forget(partition.name);
    await this.pool.query(detachPartition(partition.kind, partition.name, 'finalize'));
  }

  /** `statements` (several, separated by semicolons: their SET LOCAL holds for the rest) in one transaction. */
  private async inTransaction(statements: string): Promise<void> {
    await inTransaction(this.pool, (client) => client.query(statements));
  }

  private async refreshKnown(): Promise<void> {
    this.known = [];
    this.known = (await this.partitions()).map(knownPartition);
  }

  private forget(name: string): void {
    this.known = this.known.filter((p) => p.name !== name);
  }

  /**
   * Makes the partition that holds candidate `c`'s finish time: its width's range, clipped to the partitions of its
   * kind around it, so that it never overlaps one made with another width. In one transaction under the partitions'
   * lock, reading the partitions there: two movers of different widths (a rolling deploy) never attach overlapping
   * ones, and the second finds the first's partition and uses it, or fits its own around it.
   */
  private async makePartitionFor(width: HistoryPartitionWidth, c: CandidateRow): Promise<void> {
    const made = await inTransaction(this.pool, async (client) => {
      await client.query(`SET LOCAL lock_timeout = '2s'`);
      await client.query(`SELECT pg_advisory_xact_lock(${ADVISORY_LOCK.historyPartitions})`);
      const all = (await client.query<PartitionRow>(HISTORY_SQL.partitions)).rows.map((r) => knownPartition(toPartition(r)));
      const theirs = all.filter((p) => p.kind === c.kind);
      if (theirs.some((p) => p.lower <= c.at_ms && c.at_ms < p.upper)) return all;
      const range = newPartitionRange(c.at_ms, Date.parse(c.lower), Date.parse(c.upper), theirs);
      const name = partitionName(c.kind, partitionSuffix(width, range.lower));
      await client.query(createPartition(c.kind, name, partitionBound(range.lower), partitionBound(range.upper)));
      return [...all, { name, kind: c.kind, ...range }];
    });
    this.known = made;
  }

  private async serverVersion(): Promise<number> {
    this.version ??= (await this.statements.rows<{ version: number }>('serverVersion', []))[0].version;
    return this.version;
  }
}
