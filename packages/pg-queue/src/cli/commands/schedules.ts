import type { Command } from 'commander';
import { PgQueueError } from '../../errors/pg-queue.error.js';
import type { MissedFires, ScheduleInfo, ScheduleSpec } from '../../interfaces/recurring-job.interface.js';
import { readIsoInstant } from '../../utils/iso-instant.js';
import type { QueueService } from '../../queue.service.js';
import type { RecurringScheduler } from '../../recurring/recurring-scheduler.js';
import { BAD_INSTANT, BAD_JSON, SCHEDULE_NOT_FOUND } from '../cli.messages.js';
import { confirm } from '../confirm.js';
import type { Connection } from '../connection.js';
import { formatDuration, parseDuration, parseInteger } from '../duration.js';
import { CliError, UsageError } from '../errors.js';
import { print, printJson, printTable, time } from '../output.js';
import { queueServiceOf } from '../queue-service.js';
import type { Run } from '../run.js';

/** The module's default recurring.orphanAfterMs. */
const ORPHAN_AFTER_MS = 300_000;

/**
 * Recurring schedules, through QueueService's own schedule methods (the statements of store/schedule.sql.ts): the
 * command changes a schedule exactly as an app's call would, and every running instance sees it at its next tick.
 */
export function registerSchedules(program: Command, run: Run): void {
  const schedules = program.command('schedules').description('list, set, pause, resume, remove and fire recurring schedules (@RecurringJob and QueueService.upsertSchedule)');

  schedules
    .command('list')
    .description('every schedule: queue, cron or interval, next and last fire, fires (of its limit), start and end, state (active, paused, ended:limit, ended:endDate, orphaned: declared in code by no running instance)')
    .option('--orphan-after <duration>', "the module's recurring.orphanAfterMs, if your app changes it (default 5m)", parseDuration('--orphan-after'), ORPHAN_AFTER_MS)
    .option('--json', 'as JSON: [{ name, queue, cron, every, timeZone, payload, missedFires, priority, maxAttempts, limit, fires, firesLeft, startDate, endDate, paused, nextFireAt, lastFireAt, ended, source, orphaned, ... }]')
    .action(
      run(async (connection, _args, options: { orphanAfter: number; json?: boolean }) => {
        const { service } = await serviceOf(connection, options.orphanAfter);
        const all = await service.schedules();
        if (options.json) return printJson(all);
        if (all.length === 0) return print('no schedules');
        printTable(
          ['name', 'queue', 'when', 'time zone', 'next fire', 'last fire', 'fires', 'start', 'end', 'state', 'source'],
          all.map((s) => [s.name, s.queue, whenOf(s), s.timeZone, time(s.nextFireAt), time(s.lastFireAt), firesOf(s), time(s.startDate), time(s.endDate), stateOf(s), s.source]),
        );
      }),
    );

  schedules
    .command('set')
    .description('create or replace a runtime schedule (QueueService.upsertSchedule): a cron or a fixed interval, firing into a queue; options not given take their defaults')
    .argument('<name>', 'the schedule')
    .requiredOption('--queue <queue>', 'the queue its jobs go to (a @JobHandler of some app handles it)')
    .option('--cron <expression>', 'a cron expression, e.g. "0 3 * * *" (5 fields, or 6 with seconds first)')
    .option('--every <duration>', 'a fixed interval from the last fire instead, e.g. 30s, 15m (at least 1s)', parseDuration('--every'))
    .option('--payload <json>', 'the payload template, a JSON object; {{fireAt}}, {{fireDate}} and {{name}} in its strings are filled in at each fire (default {})')
    .option('--time-zone <zone>', "the cron's IANA time zone, and the day of {{fireDate}} (default UTC)")
    .option('--limit <n>', 'fire at most this many times, then stop', parseInteger('--limit', 1, Number.MAX_SAFE_INTEGER))
    .option('--start <iso-date>', 'no fire before this instant, e.g. 2026-12-01T08:00:00Z (an --every schedule fires first then)')
    .option('--end <iso-date>', 'no fire after this instant')
    .option('--priority <n>', 'priority of each fired job (default 0)', parseInteger('--priority', -2_147_483_647, 2_147_483_647))
    .option('--max-attempts <n>', "attempts of each fired job (default: the queue's)", parseInteger('--max-attempts', 1, 1_000))
    .option('--missed-fires <policy>', "a cron schedule's fires missed while no instance ran: skip (default), latest, or a window such as 1h")
    .action(
      run(async (connection, [name], options: SetOptions) => {
        const { service } = await serviceOf(connection);
        const spec = specOf(name, options);
        let info: ScheduleInfo;
        try {
          info = await service.upsertSchedule(spec);
        } catch (error) {
          if (error instanceof PgQueueError && error.cause === undefined) throw new UsageError(error.message);
          throw error;
        }
        print(`set schedule ${info.name}: ${whenOf(info)} into queue ${info.queue}; ${info.nextFireAt ? `next fire ${time(info.nextFireAt)}` : `it has ended (${info.ended})`}${info.limit === null ? '' : `; ${info.firesLeft} of ${info.limit} fire(s) left`}`);
      }),
    );

  schedules
    .command('pause')
    .description('stop the schedule firing, on every instance, until resumed (fires during the pause never run; a code schedule stays paused across boots)')
    .argument('<name>', 'the schedule')
    .action(
      run(async (connection, [name]) => {
        const { service } = await serviceOf(connection);
        const schedule = await existing(service, name);
        if (schedule.paused) return print(`schedule ${name} is already paused`);
        if (!(await service.pauseSchedule(name))) throw new CliError(SCHEDULE_NOT_FOUND(name));
        print(`paused schedule ${name}`);
      }),
    );

  schedules
    .command('resume')
    .description('let a paused schedule fire again, from its next fire time after now')
    .argument('<name>', 'the schedule')
    .action(
      run(async (connection, [name]) => {
        const { service } = await serviceOf(connection);
        const schedule = await existing(service, name);
        if (!schedule.paused) return print(`schedule ${name} is not paused`);
        if (!(await service.resumeSchedule(name))) throw new CliError(SCHEDULE_NOT_FOUND(name));
        const resumed = await existing(service, name);
        print(`resumed schedule ${name}: next fire ${time(resumed.nextFireAt)}`);
      }),
    );

  schedules
    .command('remove')
    .description('delete the schedule (its jobs already enqueued stay); asks first, --yes in a script')
    .argument('<name>', 'the schedule')
    .option('-y, --yes', 'do not ask')
    .action(
      run(async (connection, [name], options: { yes?: boolean }) => {
        const { service } = await serviceOf(connection);
        const schedule = await existing(service, name);
        const when = schedule.cron !== null ? `cron ${JSON.stringify(schedule.cron)}` : whenOf(schedule);
        if (!options.yes) await confirm(`remove the schedule ${name} (queue ${schedule.queue}, ${when})`, { dryRun: false });
        if (!(await service.removeSchedule(name))) throw new CliError(SCHEDULE_NOT_FOUND(name));
        print(
          schedule.source === 'code'
            ? `removed schedule ${name}; it is declared in code: an instance that declares it makes it again at its next boot (pause it to keep it from firing)`
            : `removed schedule ${name}`,
        );
      }),
    );

  schedules
    .command('fire')
    .description("enqueue one fire of the schedule now: the job a tick would enqueue (its payload template filled in, with _schedule, its priority and attempts); the schedule's own next fire does not move, and its limit does not count it")
    .argument('<name>', 'the schedule')
    .action(
      run(async (connection, [name]) => {
        const { service, scheduler } = await serviceOf(connection);
        const schedule = await existing(service, name);
        const id = await scheduler.fireNow(name);
        if (id === null) throw new CliError(SCHEDULE_NOT_FOUND(name));
        print(`enqueued job ${id} to queue ${schedule.queue} (a fire of schedule ${name})`);
      }),
    );
}

async function serviceOf(connection: Connection, orphanAfterMs = ORPHAN_AFTER_MS): Promise<{ service: QueueService; scheduler: RecurringScheduler }> {
  try {
    return await queueServiceOf(connection, { recurring: { orphanAfterMs } });
  } catch (error) {
    // The module's own check of the option (a PgQueueError without a cause): bad usage.
    if (error instanceof PgQueueError && error.cause === undefined) throw new UsageError(`--orphan-after ${formatDuration(orphanAfterMs)}: ${error.message}`);
    throw error;
  }
}

/** The schedule of that name; a name the queue refuses is bad usage (exit 2), one that names nothing an error (exit 1). */
async function existing(service: QueueService, name: string): Promise<ScheduleInfo> {
  let schedule: ScheduleInfo | null;
  try {
    schedule = await service.schedule(name);
  } catch (error) {
    if (error instanceof PgQueueError && error.cause === undefined) throw new UsageError(error.message);
    throw error;
  }
  if (!schedule) throw new CliError(SCHEDULE_NOT_FOUND(name));
  return schedule;
}

function stateOf(schedule: ScheduleInfo): string {
  if (schedule.paused) return 'paused';
  if (schedule.ended) return `ended:${schedule.ended}`;
  return schedule.orphaned ? 'orphaned' : 'active';
}

/** The cron expression, or `every 30s`. */
function whenOf(schedule: ScheduleInfo): string {
  return schedule.every !== null ? `every ${formatDuration(schedule.every)}` : (schedule.cron ?? '');
}

/** Fires so far, of the limit when there is one: `3/5`. */
function firesOf(schedule: ScheduleInfo): string {
  return schedule.limit === null ? String(schedule.fires) : `${schedule.fires}/${schedule.limit}`;
}

interface SetOptions {
  queue: string;
  cron?: string;
  every?: number;
  payload?: string;
  timeZone?: string;
  limit?: number;
  start?: string;
  end?: string;
  priority?: number;
  maxAttempts?: number;
  missedFires?: string;
}

/** upsertSchedule's spec from the options; what only the library can check (the cron, the bounds) it checks. */
function specOf(name: string, o: SetOptions): ScheduleSpec {
  if (o.cron !== undefined && o.every !== undefined) throw new UsageError('--cron and --every exclude each other: a schedule fires on a cron expression or at a fixed interval');
  if (o.cron === undefined && o.every === undefined) throw new UsageError('give --cron <expression> or --every <duration>');
  let payload: Record<string, unknown> | undefined;
  if (o.payload !== undefined) {
    try {
      payload = JSON.parse(o.payload) as Record<string, unknown>;
    } catch (error) {
      throw new UsageError(BAD_JSON((error as Error).message));
    }
  }
  const base = {
    name,
    queue: o.queue,
    ...(payload !== undefined && { payload }),
    ...(o.timeZone !== undefined && { timeZone: o.timeZone }),
    ...(o.limit !== undefined && { limit: o.limit }),
    ...(o.start !== undefined && { startDate: instant('--start', o.start) }),
    ...(o.end !== undefined && { endDate: instant('--end', o.end) }),
    ...(o.priority !== undefined && { priority: o.priority }),
    ...(o.maxAttempts !== undefined && { maxAttempts: o.maxAttempts }),
    ...(o.missedFires !== undefined && { missedFires: missedFiresOf(o.missedFires) }),
  };
  return o.every !== undefined ? { ...base, every: o.every } : { ...base, cron: o.cron! };
}

function instant(option: string, value: string): Date {
  const read = readIsoInstant(value);
  if ('date' in read) return read.date;
  if ('noSuch' in read) throw new UsageError(`${option} ${JSON.stringify(value)} is not a date-time that exists (${read.noSuch}): nothing was changed`);
  throw new UsageError(BAD_INSTANT(option, value));
}

function missedFiresOf(value: string): MissedFires {
  if (value === 'skip' || value === 'latest') return value;
  try {
    return { windowMs: parseDuration('--missed-fires')(value) };
  } catch {
    throw new UsageError(`--missed-fires ${JSON.stringify(value)}: expected skip, latest or a window such as 1h`);
  }
}
