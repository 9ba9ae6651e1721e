import { InvalidArgumentError, type Command } from 'commander';
import type { JobStatus } from '../../interfaces/job.interface.js';
import type { JobFilter } from '../../store/admin.store.js';
import { DEFAULT_JOB_LIST_ORDER, type JobListOrder } from '../../store/job-list-order.js';
import { isBigintId } from '../../utils/bigint-id.js';
import { assertQueueName } from '../../utils/resolve-options.js';
import { BAD_JOB_ID, BAD_STATUS, JOB_NOT_FOUND, NOT_CHANGED } from '../cli.messages.js';
import { parseDuration, parseInteger } from '../duration.js';
import { CliError, UsageError } from '../errors.js';
import { oneLine, print, printJson, printTable, time } from '../output.js';
import type { Run } from '../run.js';
import { queueServiceOf } from '../queue-service.js';

/** Every status (blocked: a flow job waiting for its parents), as the filters and `stats` take and show them. */
export const ALL_STATUSES: readonly JobStatus[] = ['queued', 'blocked', 'processing', 'completed', 'failed', 'cancelled'];

/** The filter options of `jobs list` and of the bulk actions. */
export interface FilterOptions {
  queue?: string;
  status?: JobStatus[];
  olderThan?: number;
  error?: string;
  due?: boolean;
  scheduled?: boolean;
}

export function addFilterOptions(command: Command): Command {
  return command
    .option('-q, --queue <queue>', 'jobs of this queue')
    .option('-s, --status <status>', `jobs in this status (${ALL_STATUSES.join(', ')}); repeat for several`, collectStatus)
    .option('--older-than <duration>', 'jobs created more than this long ago (database clock), e.g. 30m, 6h, 7d', parseDuration('--older-than'))
    .option('--error <text>', 'jobs whose last error contains this text (case-insensitive)')
    .option('--due', 'queued jobs whose run_at has come (they run as soon as a worker is free)')
    .option('--scheduled', 'queued jobs whose run_at is still ahead (delayed, backing off, snoozed)');
}

function collectStatus(value: string, previous: JobStatus[] | undefined): JobStatus[] {
  if (!(ALL_STATUSES as string[]).includes(value)) throw new InvalidArgumentError(BAD_STATUS(value, ALL_STATUSES));
  return [...(previous ?? []), value as JobStatus];
}

export function toFilter(options: FilterOptions, statuses: readonly JobStatus[] = ALL_STATUSES): JobFilter {
  if (options.queue !== undefined) queueName(options.queue);
  if (options.due && options.scheduled) throw new UsageError('--due and --scheduled exclude each other: leave both out for every queued job.');
  const when = options.due ? 'due' : options.scheduled ? 'scheduled' : undefined;
  // Due and scheduled are kinds of queued jobs: they narrow the statuses to queued (a --status without it matches none).
  if (when && options.status && !options.status.includes('queued')) throw new UsageError(`--${when} lists queued jobs only: drop --status, or give --status queued.`);
  return {
    queue: options.queue,
    statuses: when ? ['queued'] : options.status ? [...new Set(options.status)] : [...statuses],
    olderThanMs: options.olderThan,
    errorContains: options.error,
    when,
  };
}

export function queueName(queue: string): string {
  try {
    assertQueueName(queue);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  return queue;
}

export function jobId(id: string): string {
  if (!isBigintId(id)) throw new UsageError(BAD_JOB_ID(id));
  return id;
}

/**
 * Text of several lines (a stack, a logged line) under a heading: each line indented by `by`. print() then shows what
 * a terminal would act on (ESC, carriage returns, the bidirectional overrides) as escapes.
 */
function indented(text: string, by: string): string {
  return text
    .split('\n')
    .map((line) => `${by}${line}`)
    .join('\n');
}

export function registerJobs(program: Command, run: Run): Command {
  const jobs = program.command('jobs').description('list, show, retry, cancel, delete and change jobs');

  addFilterOptions(jobs.command('list'))
    .description('jobs matching the filters, newest first (the dashboard\'s order; --oldest-first for the other way), one page at a time')
    .option('--oldest-first', 'the oldest job (lowest id) first, for walking a backlog from its start')
    .option('--after <id>', 'the page after this job id in the list\'s order (keyset paging: pass the last id of the page before)')
    .option('--limit <n>', 'jobs per page (1 to 10,000)', parseInteger('--limit', 1, 10_000), 50)
    .option('--json', 'as JSON lines, one job per line')
    .action(
      run(async (connection, _args, options: FilterOptions & { after?: string; limit: number; json?: boolean; oldestFirst?: boolean }) => {
        const after = options.after === undefined ? null : jobId(options.after);
        const order: JobListOrder = options.oldestFirst ? 'oldest' : DEFAULT_JOB_LIST_ORDER;
        const page = await connection.adminStore().listJobs(toFilter(options), after, options.limit, order);
        if (options.json) {
          for (const job of page) print(JSON.stringify(job));
          return;
        }
        if (page.length === 0) return print('no jobs match');
        printTable(
          ['id', 'queue', 'status', 'attempts', 'priority', 'run at', 'created at', 'last error'],
          page.map((j) => [j.id, j.queue, j.status, `${j.attempts}/${j.maxAttempts}`, String(j.priority), time(j.runAt), time(j.createdAt), j.lastError ?? '']),
        );
        if (page.length === options.limit) print(`next page: --after ${page.at(-1)!.id}${options.oldestFirst ? ' --oldest-first' : ''}`);
      }),
    );

  jobs
    .command('show')
    .description('one job, every column, with its payload, full last error, attempt history (each error whole) and logs (job.log(), by attempt)')
    .argument('<id>', 'the job id')
    .option('--json', 'as JSON')
    .action(
      run(async (connection, [id], options: { json?: boolean }) => {
        const job = await connection.jobStore().getJob(jobId(id));
        if (!job) throw new CliError(JOB_NOT_FOUND(id));
        if (options.json) return printJson(job);
        const { payload, lastError, steps, history, logs, logsDropped, ...fields } = job;
        const shown = (value: unknown) => (value instanceof Date ? value.toISOString() : value !== null && typeof value === 'object' ? JSON.stringify(value) : String(value ?? ''));
        for (const [key, value] of Object.entries(fields)) print(`${key.padEnd(15)} ${oneLine(shown(value))}`);
        print('payload');
        print(JSON.stringify(payload, null, 2));
        if (steps.length > 0) {
          print('steps (job.step / job.sleep: a later attempt returns these without running them again)');
          for (const step of steps) {
            const what = step.kind === 'sleep' ? `sleep until ${step.until!.toISOString()}` : 'result' in step ? JSON.stringify(step.result) : '(no result)';
            print(`  ${oneLine(step.name)}  attempt ${step.attempt}  ${step.at.toISOString()}  ${oneLine(what)}`);
          }
        }
        if (lastError) {
          print('last error');
          print(lastError);
        }
        if (history.length > 0) {
          print('attempt history (attempts that did not complete, oldest first, each with its whole error)');
          for (const a of history) {
            const ran = a.durationMs === null ? '' : `  ${Math.round(a.durationMs)} ms`;
            print(`  ${a.attempt}  ${a.outcome}  ${oneLine(a.worker ?? '?')}  ${a.startedAt?.toISOString() ?? '?'}${ran}`);
            if (a.error !== null) print(indented(a.error, '      '));
          }
        }
        if (logs.length > 0 || logsDropped > 0) {
          const older = logsDropped > 0 ? `, ${logsDropped} older dropped (jobLogs.maxLines)` : '';
          print(`logs (job.log(), oldest first, by attempt: ${logs.length} line${logs.length === 1 ? '' : 's'}${older})`);
          let attempt: number | undefined;
          for (const l of logs) {
            if (l.attempt !== attempt) print(`  attempt ${(attempt = l.attempt)}`);
            print(`    ${l.at.toISOString()}  ${indented(l.line, '      ').trimStart()}`);
          }
        }
      }),
    );
  jobs
    .command('why')
    .description('why the job is not running: every gate that holds it, in words (due later, paused, nobody serves the queue, a limit, its parents...)')
    .argument('<id>', 'the job id')
    .option('--json', 'as JSON: { id, queue, status, reasons: [{ gate, reason }] }')
    .action(
      run(async (connection, [id], options: { json?: boolean }) => {
        const { service } = await queueServiceOf(connection);
        const why = await service.whyNotRunning(jobId(id));
        if (!why) throw new CliError(JOB_NOT_FOUND(id));
        if (options.json) return printJson(why);
        print(`job ${why.id} (queue ${oneLine(why.queue)}) is ${why.status}`);
        for (const r of why.reasons) print(`  ${r.gate.padEnd(18)} ${oneLine(r.reason)}`);
      }),
    );
  jobs
    .command('update-payload')
    .description("replace the payload of a job that has not started (a job that started, or that a worker read ahead, keeps its own)")
    .argument('<id>', 'the job id')
    .argument('<json>', 'the new payload as JSON, e.g. \'{"to":"ada@example.com"}\'')
    .action(
      run(async (connection, [id, json]) => {
        let payload: unknown;
        try {
          payload = JSON.parse(json);
        } catch (error) {
          throw new UsageError(`the payload is not JSON (${(error as Error).message}); quote it for your shell, e.g. '{"a":1}'`);
        }
        const { service } = await queueServiceOf(connection);
        const answer = await service.updatePayload(jobId(id), payload);
        if (answer !== 'changed') throw new CliError(NOT_CHANGED(id, answer));
        print(`job ${id}: payload replaced`);
      }),
    );
  return jobs;
}
