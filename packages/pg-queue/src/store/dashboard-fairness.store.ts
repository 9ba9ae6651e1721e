import type { PoolClient } from 'pg';
import { DASHBOARD_FAIRNESS_SQL } from './dashboard-fairness.sql.js';

/** The queue page lists at most this many stored weights (by key). */
export const WEIGHTS_SHOWN = 200;

/** The dashboard's reads of a queue's fair share state (dashboard-fairness.sql.ts), on a request's connection. */
export class DashboardFairnessQueries {
  constructor(private readonly client: PoolClient) {}

  /** A fair claim ran for the queue somewhere, or a weight is stored for it. */
  async seen(queue: string): Promise<boolean> {
    return (await this.client.query<{ seen: boolean }>({ text: DASHBOARD_FAIRNESS_SQL.fairSeen, values: [queue] })).rows[0].seen;
  }

  /** The stored weights by key, the first WEIGHTS_SHOWN (and whether there are more). */
  async weights(queue: string): Promise<{ stored: [string, number][]; more: boolean }> {
    const { rows } = await this.client.query<{ key: string; weight: number }>({ text: DASHBOARD_FAIRNESS_SQL.weights, values: [queue, WEIGHTS_SHOWN + 1] });
    return { stored: rows.slice(0, WEIGHTS_SHOWN).map((r) => [r.key, r.weight]), more: rows.length > WEIGHTS_SHOWN };
  }
}
