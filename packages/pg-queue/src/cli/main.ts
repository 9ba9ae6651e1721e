#!/usr/bin/env node
// The package's command line (`pg-queue`). Nothing in the library imports this folder: an app that never runs
// the command pays nothing for it (commander, cli-progress and these files stay out of its import graph).
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { registerBulk } from './commands/bulk.js';
import { registerDoctor } from './commands/doctor.js';
import { registerEnqueue } from './commands/enqueue.js';
import { registerEvents } from './commands/events.js';
import { registerFlows } from './commands/flows.js';
import { registerInstances } from './commands/instances.js';
import { registerJobs } from './commands/jobs.js';
import { registerLimits } from './commands/limits.js';
import { registerMigrate } from './commands/migrate.js';
import { registerPrune } from './commands/prune.js';
import { registerQueues } from './commands/queues.js';
import { registerWeights } from './commands/weights.js';
import { registerSchedules } from './commands/schedules.js';
import { registerStats } from './commands/stats.js';
import { parseDuration } from './duration.js';
import { describeError, EXIT, UsageError } from './errors.js';
import { current, run } from './run.js';
import { terminalText } from '../utils/terminal-text.js';

// The package's version; a copy of the sources compiled elsewhere (the test suite's swc build) has a package.json without one.
const { version = 'unknown' } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string };

const program = new Command('pg-queue')
  .version(version, '--version', 'the version of nestjs-pg-queue this command comes with')
  .description('Operate a nestjs-pg-queue database: migrations, stats, jobs, flows, queues, maintenance, health checks.')
  .option('--url <url>', 'PostgreSQL URL (default: $DATABASE_URL); its password is never printed, but other users see it in ps: prefer DATABASE_URL, PGPASSWORD or ~/.pgpass')
  .option('--database <name>', 'an app with several queue databases: the one named <name>, whose URL is in $DATABASE_URL_<NAME> (e.g. --database reports reads DATABASE_URL_REPORTS)')
  .option('--transaction-pooler', 'the URL goes through a transaction pooler (PgBouncer in transaction mode): send no named prepared statements')
  .option('--connect-timeout <duration>', 'how long to wait for a connection to the database, e.g. 30s (default 10s)', parseDuration('--connect-timeout'))
  .option('--verbose', 'print the stack of an error')
  .showHelpAfterError('(run with --help for usage)')
  .exitOverride()
  .configureOutput({ outputError: (text, write) => write(terminalText(text)) });

registerMigrate(program, run);
registerStats(program, run);
registerBulk(registerJobs(program, run), run);
registerEnqueue(program, run);
registerQueues(program, run);
registerWeights(program, run);
registerEvents(program, run);
registerLimits(program, run);
registerPrune(program, run);
registerDoctor(program, run);
registerSchedules(program, run);
registerFlows(program, run);
registerInstances(program, run);

try {
  await program.parseAsync(process.argv);
  process.exitCode = EXIT.ok;
} catch (error) {
  process.exitCode = report(error);
}

/** One line on stderr (the stack only with --verbose, the password masked always); the exit code. */
function report(error: unknown): number {
  if (error instanceof CommanderError) {
    // Commander printed its message already; --help and --version end here too.
    return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
  }
  const mask = (text: string) => (current ? current.mask(text) : text);
  const verbose = program.opts<{ verbose?: boolean }>().verbose === true;
  const explained = current ? current.explain(error) : error;
  const text = verbose && error instanceof Error && error.stack ? error.stack : describeError(explained);
  process.stderr.write(`pg-queue: ${terminalText(mask(text))}\n`);
  return error instanceof UsageError ? EXIT.usage : EXIT.error;
}
