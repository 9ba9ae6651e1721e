import { sleep } from '../host/clock.js';
import { withClient } from './sql.js';

/** One normalised statement as pg_stat_statements counts it, for one database. */
export interface StatementFigure {
  query: string;
  calls: number;
  totalMs: number;
  rows: number;
}

/**
 * Switches pg_stat_statements tracking on or off server-wide. A backend applies a reloaded setting before
 * it executes its next command, so every statement sent after this returns is counted (or not).
 */
export async function setStatementTracking(serverUrl: string, on: boolean): Promise<void> {
  await withClient(serverUrl, async (c) => {
    await c.query(`ALTER SYSTEM SET pg_stat_statements.track = '${on ? 'top' : 'none'}'`);
    await c.query('SELECT pg_reload_conf()');
  });
  await sleep(200); // let the postmaster signal every backend
}

/** Per-statement counters of one database, read from the maintenance database (so the read is not counted). */
export async function statementFigures(serverUrl: string, database: string): Promise<StatementFigure[]> {
  return withClient(serverUrl, async (c) => {
    const rows = (await c.query<{ query: string; calls: string; total: number; rows: string }>(
      `SELECT query, calls, total_exec_time AS total, rows FROM pg_stat_statements
       WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)`,
      [database],
    )).rows;
    return rows.map((r) => ({ query: r.query.replace(/\s+/g, ' ').trim(), calls: Number(r.calls), totalMs: r.total, rows: Number(r.rows) }));
  });
}

/** What ran between two readings: statements with their call counts, busiest first. */
export function statementDelta(before: StatementFigure[], after: StatementFigure[]): StatementFigure[] {
  const base = new Map(before.map((s) => [s.query, s]));
  return after
    .map((s) => {
      const b = base.get(s.query);
      return { query: s.query, calls: s.calls - (b?.calls ?? 0), totalMs: s.totalMs - (b?.totalMs ?? 0), rows: s.rows - (b?.rows ?? 0) };
    })
    .filter((s) => s.calls > 0)
    .sort((a, b) => b.calls - a.calls);
}
