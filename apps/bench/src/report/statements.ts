import type { SystemId } from '../adapters/types.js';
import type { StatementFigure } from '../db/statements.js';
import { SYSTEMS } from '../systems.js';
import { formatNumber } from './format.js';

export interface StatementRecord {
  run: number;
  system: SystemId;
  label: string;
  /** Jobs the figures cover; 0 for the idle window. */
  jobs: number;
  statements: StatementFigure[];
}

function shorten(query: string, width: number): string {
  return query.length > width ? `${query.slice(0, width - 1)}…` : query;
}

/**
 * What each system sent to the database: per job for the throughput scenarios (with --statements), per
 * second of the idle window always. The first run's figures; later runs repeat them.
 */
export function renderStatements(records: StatementRecord[], idleWindowMs: number): string {
  const lines: string[] = [];
  const firstRun = Math.min(...records.map((r) => r.run));
  for (const r of records.filter((x) => x.run === firstRun)) {
    const calls = r.statements.reduce((sum, s) => sum + s.calls, 0);
    const ms = r.statements.reduce((sum, s) => sum + s.totalMs, 0);
    if (r.jobs > 0) {
      lines.push(`${SYSTEMS[r.system].label}, ${r.label}: ${formatNumber(calls / r.jobs, 3)} statements and ${formatNumber(ms / r.jobs, 3)} ms of execution per job`);
      for (const s of r.statements.slice(0, 4)) {
        lines.push(`  ${formatNumber(s.calls / r.jobs, 3).padStart(7)}/job  ${formatNumber(s.totalMs / s.calls, 3).padStart(8)} ms  ${formatNumber(s.rows / s.calls, 1).padStart(6)} rows  ${shorten(s.query, 90)}`);
      }
    } else {
      const seconds = idleWindowMs / 1000;
      lines.push(`${SYSTEMS[r.system].label}, ${r.label} (${seconds} s): ${formatNumber(calls / seconds, 2)} statements/s`);
      for (const s of r.statements.slice(0, 5)) lines.push(`  ${String(s.calls).padStart(5)} x  ${shorten(s.query, 100)}`);
    }
  }
  return lines.join('\n');
}
