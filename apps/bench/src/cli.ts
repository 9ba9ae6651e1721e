import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { BASELINE_ID, SYSTEM_IDS, type SystemId } from './adapters/types.js';
import { PROFILES, SCENARIOS, type Profile, type ScenarioName } from './config.js';

export interface BenchOptions {
  profile: Profile;
  runs: number;
  scenarios: ScenarioName[];
  systems: SystemId[];
  /** Keep pg_stat_statements tracking on for every scenario and save per-statement figures (adds overhead). */
  statements: boolean;
  /** Jobs scheduled for tomorrow present during the backlog scenario (--future N): claims must not slow down with them. */
  futureJobs: number;
  /** A complete run (every scenario and system, default or full profile, 3+ runs) writes results/latest.*; others write results/tmp/. */
  complete: boolean;
}

const USAGE = `usage: npm run bench -- [--quick | --full] [--runs N] [--only ${SCENARIOS.join(',')}] [--systems ${SYSTEM_IDS.join(',')}] [--statements] [--future N] [--baseline <checkout>]`;

export function parseCli(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      full: { type: 'boolean', default: false },
      runs: { type: 'string' },
      only: { type: 'string' },
      systems: { type: 'string' },
      statements: { type: 'boolean', default: false },
      baseline: { type: 'string' },
      future: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  if (values.quick && values.full) throw new Error(`--quick and --full exclude each other\n${USAGE}`);
  const profile = PROFILES[values.quick ? 'quick' : values.full ? 'full' : 'default'];
  const runs = values.runs === undefined ? profile.runs : Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer\n${USAGE}`);
  const futureJobs = values.future === undefined ? 0 : Number(values.future);
  if (!Number.isInteger(futureJobs) || futureJobs < 0) throw new Error(`--future must be a non-negative integer (jobs scheduled for tomorrow)\n${USAGE}`);
  const scenarios = pick('--only', values.only, SCENARIOS);
  const systems: SystemId[] = pick('--systems', values.systems, [...SYSTEM_IDS, BASELINE_ID]).filter((s) => s !== BASELINE_ID || values.baseline);
  if (values.baseline) {
    // Before/after in one run: the baseline checkout (built with `npm run build && npx tsc -b apps/bench` there)
    // runs as its own system next to ours.
    process.env.BENCH_BASELINE_DIR = resolve(values.baseline);
    if (!systems.includes(BASELINE_ID)) systems.splice(systems.indexOf('pg-queue') + 1, 0, BASELINE_ID);
  }
  const complete = profile.name !== 'quick' && futureJobs === 0 && runs >= 3 && scenarios.length === SCENARIOS.length && systems.length === SYSTEM_IDS.length;
  return { profile, runs, scenarios, systems, statements: values.statements ?? false, futureJobs, complete };
}

function pick<T extends string>(flag: string, value: string | undefined, all: readonly T[]): T[] {
  if (value === undefined) return all.filter((a) => a !== BASELINE_ID);
  const wanted = value.split(',').map((s) => s.trim()).filter(Boolean);
  for (const w of wanted) if (!all.includes(w as T)) throw new Error(`${flag}: unknown "${w}"; known: ${all.join(', ')}\n${USAGE}`);
  return all.filter((a) => wanted.includes(a));
}
