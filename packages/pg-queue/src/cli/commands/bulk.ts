import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import type { JobStatus } from '../../interfaces/job.interface.js';
import type { AdminStore, BulkAction, BulkChange, JobFilter } from '../../store/admin.store.js';
import { IDS_AND_FILTERS, JOBS_NOT_FOUND, NO_TARGET, NOTHING_APPLIES, STATUS_NOT_ALLOWED } from '../cli.messages.js';
import { confirm } from '../confirm.js';
import { formatDuration, parseDuration, parseInstant, parseInteger } from '../duration.js';
import { CliError, UsageError } from '../errors.js';
import { count, print } from '../output.js';
import type { Run } from '../run.js';
import { addFilterOptions, jobId, toFilter, type FilterOptions } from './jobs.js';

interface BulkOptions extends FilterOptions {
  all?: boolean;
  dryRun?: boolean;
  yes?: boolean;
  batchSize: number;
  /** set-priority */
  to?: number;
  /** delay */
  by?: number;
  until?: string;
}

interface Action {
  statuses: JobStatus[];
  verb: string;
  done: string;
  help: string;
  /** Why a job it looked at was not changed (beside retry's jobs waiting for a parent). */
  skipped: string;
}

/** A job changed after enqueue (promote, set-priority, delay) has not started and no worker holds it. */
const CHANGE = { statuses: ['queued', 'blocked'] as JobStatus[], skipped: 'held by a worker that read it ahead: it starts as it was' };

/** What each action can change: a job in another status is left alone (and not counted). */
const ACTIONS: Record<BulkAction, Action> = {
  retry: { statuses: ['failed', 'cancelled'], verb: 'retry', done: 'retried', help: 'queue failed or cancelled jobs again, now, with their attempts reset', skipped: 'another job holds its unique key' },
  cancel: {
    statuses: ['queued', 'processing'],
    verb: 'cancel',
    done: 'cancelled',
    help: "cancel queued or running jobs (a running job's worker is told to abort it; its outcome is refused)",
    skipped: 'it ended first',
  },
  delete: { statuses: ['queued', 'completed', 'failed', 'cancelled'], verb: 'delete', done: 'deleted', help: 'delete jobs (never running ones: cancel them first)', skipped: 'a worker holds it' },
  promote: {
    ...CHANGE,
    verb: 'promote',
    done: 'promoted',
    help: 'run waiting jobs now: a delayed, backing-off or snoozed job becomes due (a due one keeps its place)',
    skipped: 'already due, or held by a worker that read it ahead',
  },
  'set-priority': { ...CHANGE, verb: 'set the priority of', done: 'changed the priority of', help: 'give jobs that have not started another priority (--to; higher runs first)' },
  delay: { ...CHANGE, verb: 'delay', done: 'delayed', help: 'move jobs that have not started to a later (or earlier) run_at: --by a duration from now, or --until a time' },
};

/** Rows a count statement reads at most; the count goes on page by page. */
const COUNT_PAGE = 10_000;

export function registerBulk(jobs: Command, run: Run): void {
  for (const action of Object.keys(ACTIONS) as BulkAction[]) {
    const { statuses, help } = ACTIONS[action];
    const command = addFilterOptions(jobs.command(action))
      .description(`${help}; by id, or every job matching the filters (statuses: ${statuses.join(', ')})`)
      .argument('[ids...]', 'job ids (instead of filters)')
      .option('--all', `every ${statuses.join(' or ')} job (no filter)`)
      .option('--dry-run', 'count the jobs it would change, change nothing')
      .option('-y, --yes', 'do not ask for confirmation (needed when stdin is not a terminal)')
      .option('--batch-size <n>', 'rows per statement (each batch is one short transaction)', parseInteger('--batch-size', 1, 50_000), 1_000);
    if (action === 'set-priority') command.requiredOption('--to <priority>', 'the new priority (an integer; higher runs first)', parseInteger('--to', -2_147_483_648, 2_147_483_647));
    if (action === 'delay') {
      command.option('--by <duration>', 'run_at becomes now (database clock) plus this, e.g. 30s, 10m, 2h', parseDuration('--by'));
      command.option('--until <time>', 'run_at becomes this time (ISO 8601, e.g. 2026-12-24T09:00:00Z)');
    }
    command.action(run(async (connection, ids, options: BulkOptions) => bulk(connection.adminStore(), action, ids, options)));
  }
}

/** What a change action sets, from its options (promote, set-priority --to, delay --by / --until). */
function changeOf(action: BulkAction, options: BulkOptions): BulkChange {
  if (action === 'promote') return { promote: true };
  if (action === 'set-priority') return { priority: options.to };
  if (action !== 'delay') return {};
  if ((options.by === undefined) === (options.until === undefined)) throw new UsageError('delay takes one of --by <duration> and --until <time>.');
  return options.by !== undefined ? { delayMs: options.by } : { runAt: parseInstant('--until', options.until!) };
}

async function bulk(store: AdminStore, action: BulkAction, ids: string[], options: BulkOptions): Promise<void> {
  const { verb, done } = ACTIONS[action];
  const filter = targetOf(action, ids, options);
  const change = changeOf(action, options);
  const described = describe(filter);
  if (filter.ids) {
    const existing = await store.existingIds(filter.ids);
    const missing = filter.ids.filter((id) => !existing.has(id));
    if (missing.length > 0) throw new CliError(JOBS_NOT_FOUND(missing));
  }

  let total = 0;
  for (let after = '0'; ; ) {
    const page = await store.countJobs(filter, after, COUNT_PAGE);
    total += page.n;
    if (page.n < COUNT_PAGE || page.lastId === null) break;
    after = page.lastId;
  }
  const summary = `${verb} ${count(total)} job(s) ${described}`;
  if (options.dryRun) return print(`dry run: would ${summary}; nothing changed`);
  // Jobs named by id of which none can change (a retry of a completed job) fail: the caller asked for these jobs.
  if (total === 0 && filter.ids) throw new CliError(NOTHING_APPLIES(verb, filter.ids, filter.statuses));
  if (total === 0) return print(`no job to ${verb} ${described}`);
  if (!options.yes) await confirm(summary);

  // The progress bar draws on stderr, only when it is a terminal (cli-progress writes nothing otherwise).
  const bar = total > options.batchSize ? new cliProgress.SingleBar({ stream: process.stderr, format: `${verb} [{bar}] {value}/{total} jobs, {eta_formatted} left` }, cliProgress.Presets.shades_classic) : undefined;
  bar?.start(total, 0);
  let changed = 0;
  let seen = 0;
  const waiting: { id: string; parent: string }[] = [];
  try {
    for (let after = '0'; ; ) {
      const batch = await store.bulkBatch(action, filter, after, options.batchSize, change);
      changed += batch.changed;
      seen += batch.seen;
      waiting.push(...(batch.waiting ?? []));
      bar?.update(Math.min(seen, total));
      if (batch.seen < options.batchSize || batch.lastId === null) break;
      after = batch.lastId;
    }
  } finally {
    bar?.stop();
  }
  const skipped = seen - changed - waiting.length;
  const parts = [`${done} ${count(changed)} job(s)`];
  if (skipped > 0) parts.push(`${count(skipped)} skipped (${ACTIONS[action].skipped})`);
  if (waiting.length > 0) {
    const named = waiting.slice(0, 10).map((w) => `job ${w.id} waits for parent job ${w.parent}`).join(', ');
    parts.push(`${count(waiting.length)} skipped: a parent of theirs has not completed or is gone (${named}${waiting.length > 10 ? ', ...' : ''}); retry the parent: its flow's jobs that failed because of it come back with it`);
  }
  print(parts.join('; '));
}

function targetOf(action: BulkAction, ids: string[], options: BulkOptions): JobFilter {
  const allowed = ACTIONS[action].statuses;
  for (const status of options.status ?? []) if (!allowed.includes(status)) throw new UsageError(STATUS_NOT_ALLOWED(action, status, allowed));
  if ((options.due || options.scheduled) && !allowed.includes('queued')) throw new UsageError(STATUS_NOT_ALLOWED(action, 'queued', allowed));
  const filtered = options.queue !== undefined || options.status !== undefined || options.olderThan !== undefined || options.error !== undefined || options.due === true || options.scheduled === true;
  if (ids.length > 0 && (filtered || options.all)) throw new UsageError(IDS_AND_FILTERS(action));
  if (ids.length === 0 && !filtered && !options.all) throw new UsageError(NO_TARGET(action));
  const filter = toFilter(options, allowed);
  if (ids.length > 0) filter.ids = [...new Set(ids.map(jobId))];
  return filter;
}

function describe(f: JobFilter): string {
  const parts = [f.ids ? `with id ${f.ids.join(', ')}` : undefined, f.queue !== undefined ? `of queue ${f.queue}` : undefined, `in status ${f.statuses.join(' or ')}`];
  if (f.olderThanMs !== undefined) parts.push(`created over ${formatDuration(f.olderThanMs)} ago`);
  if (f.errorContains !== undefined) parts.push(`whose last error contains ${JSON.stringify(f.errorContains)}`);
  if (f.when !== undefined) parts.push(f.when === 'due' ? 'whose run_at has come' : 'whose run_at is still ahead');
  return parts.filter(Boolean).join(', ');
}
