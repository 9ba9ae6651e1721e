import type { SystemId } from '../adapters/types.js';
import type { Profile } from '../config.js';
import type { StatementFigure } from '../db/statements.js';
import type { SystemInfo } from '../systems.js';

/** Metric id -> value, for one system in one run of one scenario. */
export type Figures = Record<string, number>;

export interface ScenarioContext {
  serverUrl: string;
  profile: Profile;
  run: number;
  /** pg_stat_statements tracking is on for the whole run (--statements). */
  statements: boolean;
  /** Jobs scheduled for tomorrow that the backlog scenario adds next to its due jobs (--future). */
  futureJobs: number;
  log: (message: string) => void;
  /** Keeps per-statement figures of one system's database for the JSON (with --statements, and while idle). */
  keepStatements: (system: SystemId, label: string, figures: StatementFigure[], jobs: number) => void;
}

export type Scenario = (ctx: ScenarioContext, system: SystemInfo) => Promise<Figures>;

/** Database names: short, unique per system, scenario and run, safe as identifiers. */
export function databaseName(scenario: string, system: SystemId, run: number): string {
  return `bench_${scenario}_${system.replace(/-/g, '_')}_r${run}`;
}
