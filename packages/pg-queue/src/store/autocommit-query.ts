import type { Pool, QueryConfig, QueryResult, QueryResultRow } from 'pg';
import { queryIds } from './ids-query.js';

/** How many times one statement runs at most while PostgreSQL keeps picking it as a deadlock's victim. */
const DEADLOCK_TRIES = 3;

/**
 * Runs one statement on the pool, in a transaction of its own (autocommit), and runs it again when PostgreSQL aborted
 * it as the victim of a deadlock (SQLSTATE 40P01): it was rolled back whole, so the second run is the first that
 * counts (PostgreSQL's documented remedy). Seen with `get(id)` while the pruner dropped a history partition: a
 * reader's cached plan of the history view locks every partition, and it was picked when its locks crossed the
 * DETACH and DROP of one (partitioned-history.spec.ts, once in CI). Never for a statement inside a caller's
 * transaction: there the whole transaction is lost, and only the caller can run it again.
 */
export function autocommitQuery<R extends QueryResultRow>(pool: Pool, query: QueryConfig): Promise<QueryResult<R>> {
  return retryDeadlockVictim(() => unnamedIfStale(query, (q) => pool.query<R>(q)));
}

/** autocommitQuery for a statement that returns one column of ids (the inserts): their values, through queryIds. */
export function autocommitIds(pool: Pool, query: QueryConfig): Promise<string[]> {
  return retryDeadlockVictim(() => unnamedIfStale(query, (q) => queryIds(pool, q)));
}

/**
 * Runs a named (prepared) statement; when PostgreSQL refuses it because the statement was prepared on this connection
 * before a migration changed the columns it returns (`SELECT *` of the jobs view, after a migration added a column to
 * the jobs tables: SQLSTATE 0A000, "cached plan must not change result type"), runs it again unnamed, which PostgreSQL
 * plans afresh. The prepared statement stays refused on that connection until the pool closes it (each call there
 * costs one round trip more meanwhile): a rolling upgrade's migration then costs this version's reads nothing.
 */
async function unnamedIfStale<T>(query: QueryConfig, run: (query: QueryConfig) => Promise<T>): Promise<T> {
  try {
    return await run(query);
  } catch (error) {
    if (query.name === undefined || !staleResultType(error)) throw error;
    return run({ text: query.text, values: query.values });
  }
}

function staleResultType(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  return e?.code === '0A000' && typeof e.message === 'string' && e.message.includes('cached plan must not change result type');
}

async function retryDeadlockVictim<T>(run: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await run();
    } catch (error) {
      if (tries >= DEADLOCK_TRIES || (error as { code?: unknown } | null)?.code !== '40P01') throw error;
    }
  }
}
