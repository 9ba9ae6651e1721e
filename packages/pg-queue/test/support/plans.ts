import type pg from 'pg';
import { beginWithQueueLock } from '../../src/store/claim.sql.js';

/** A node of EXPLAIN (FORMAT JSON)'s plan tree, with the fields the plan tests read. */
export interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Relation Name'?: string;
  'CTE Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

/** Every node of a plan tree, the root first. */
export const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

/** The plan's sequential scans of background_jobs: none may appear on a big table. */
export const seqScans = (all: PlanNode[]) => all.filter((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'background_jobs');

/**
 * EXPLAIN ANALYZE of a statement as the app runs it (prepared, with `types` and `args`), once with a custom
 * and once with a generic plan: node-postgres' named statements switch to the generic plan after five runs.
 * Each run is rolled back, so a statement that writes leaves the table as it was. Per plan mode: the pages
 * the statement read (shared hits and reads) and every node of its plan.
 */
export async function explainBothModes(db: pg.Pool, sql: string, types = '', args = ''): Promise<Record<string, { pages: number; all: PlanNode[] }>> {
  const client = await db.connect();
  const out: Record<string, { pages: number; all: PlanNode[] }> = {};
  try {
    await client.query(types ? `PREPARE s(${types}) AS ${sql}` : `PREPARE s AS ${sql}`);
    for (const mode of ['force_custom_plan', 'force_generic_plan']) {
      await client.query(`SET plan_cache_mode = ${mode}`);
      await client.query('BEGIN');
      const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE s${args ? `(${args})` : ''}`);
      await client.query('ROLLBACK');
      const plan = rows[0]['QUERY PLAN'][0].Plan as PlanNode;
      out[mode] = { pages: (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0), all: nodes(plan) };
    }
  } finally {
    await client.query('DEALLOCATE ALL');
    client.release();
  }
  return out;
}

/** Runs `work` inside a limited claim's transaction (the queue's advisory lock taken first, as the workers take it), rolled back. */
export async function inClaimTransaction<T>(db: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.connect();
  try {
    await client.query(beginWithQueueLock(1));
    return await work(client);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

/** EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) of a claim statement inside its transaction (inClaimTransaction), as text. */
export const explainClaim = (db: pg.Pool, sql: string, values: unknown[]): Promise<string> =>
  inClaimTransaction(db, async (client) => (await client.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${sql}`, values)).rows.map((r) => r['QUERY PLAN']).join('\n'));
