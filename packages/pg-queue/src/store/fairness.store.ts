import type { Pool } from 'pg';
import { FAIRNESS_SQL } from './fairness.sql.js';
import { Statements } from './statements.js';

/** Fair share weights stored at runtime, one method per statement of fairness.sql.ts, on the queue's own pool. */
export class FairnessStore {
  private readonly statements: Statements<typeof FAIRNESS_SQL>;

  constructor(pool: Pool, options: { transactionPooler?: boolean } = {}) {
    this.statements = new Statements(pool, FAIRNESS_SQL, 'pgq_fairness_', options);
  }

  /** Stores each key's weight (null: removes the key's stored weight). */
  async setWeights(queue: string, weights: ReadonlyArray<readonly [string, number | null]>): Promise<void> {
    await this.statements.result('setWeights', [queue, weights.map(([k]) => k), weights.map(([, w]) => w)]);
  }

  /** The weights stored for the queue (keys without one weigh what the queue's fairness option says). */
  async weights(queue: string): Promise<Record<string, number>> {
    const rows = await this.statements.rows<{ key: string; weight: number }>('weights', [queue]);
    return Object.fromEntries(rows.map((r) => [r.key, r.weight]));
  }
}
