import type { Pool, QueryResultRow } from 'pg';
import { Statements } from './statements.js';
import type { RateWindow, WaitFacts } from '../waiting/wait-reasons.js';
import { WAIT_SQL } from './wait.sql.js';

/** "Why is this job not running?": one method per statement of wait.sql.ts, on the queue's own pool. */
export class WaitStore {
  private readonly statements: Statements<typeof WAIT_SQL>;

  constructor(
    pool: Pool,
    options: { transactionPooler?: boolean } = {},
  ) {
    this.statements = new Statements(pool, WAIT_SQL, 'pgq_wait_', options);
  }

  private run<R extends QueryResultRow>(name: keyof typeof WAIT_SQL, values: unknown[]): Promise<R[]> {
    return this.statements.rows<R>(name, values);
  }

  /** The facts each gate reads for job `id`, with the database's clock; null when there is no such job. */
  async jobWaitFacts(id: string): Promise<{ facts: WaitFacts; now: Date } | null> {
    const [row] = await this.run<WaitFacts & { now: Date }>('jobWaitFacts', [id]);
    if (!row) return null;
    const { now, ...facts } = row;
    return { facts, now };
  }

  async rateWindow(queue: string, intervalMs: number): Promise<RateWindow> {
    const [row] = await this.run<{ started: number; frees_in_ms: number | null }>('rateWindow', [queue, intervalMs]);
    return { started: row.started, freesInMs: row.frees_in_ms };
  }
}
