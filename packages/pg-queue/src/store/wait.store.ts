import type { Pool, QueryConfig, QueryResultRow } from 'pg';
import type { RateWindow, WaitFacts } from '../waiting/wait-reasons.js';
import { WAIT_SQL } from './wait.sql.js';

/** "Why is this job not running?": one method per statement of wait.sql.ts, on the queue's own pool. */
export class WaitStore {
  private readonly named: boolean;

  constructor(
    private readonly pool: Pool,
    options: { transactionPooler?: boolean } = {},
  ) {
    this.named = !options.transactionPooler;
  }

  private async run<R extends QueryResultRow>(name: keyof typeof WAIT_SQL, values: unknown[]): Promise<R[]> {
    const query: QueryConfig = this.named ? { name: `pgq_wait_${name}`, text: WAIT_SQL[name], values } : { text: WAIT_SQL[name], values };
    return (await this.pool.query<R>(query)).rows;
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
