import type { Command } from 'commander';
import { PgQueueError } from '../../errors/pg-queue.error.js';
import type { ScheduleInfo } from '../../interfaces/recurring-job.interface.js';
import type { QueueService } from '../../queue.service.js';
import type { RecurringScheduler } from '../../recurring/recurring-scheduler.js';
import { SCHEDULE_NOT_FOUND } from '../cli.messages.js';
import { confirm } from '../confirm.js';
import type { Connection } from '../connection.js';
import { formatDuration, parseDuration } from '../duration.js';
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
  const schedules = program.command('schedules').description('list, pause, resume, remove and fire recurring schedules (@RecurringJob and QueueService.upsertSchedule)');

  schedules
    .command('list')
    .description('every schedule: queue, cron, next and last fire, state (active, paused, orphaned: declared in code by no running instance)')
    .option('--orphan-after <duration>', "the module's recurring.orphanAfterMs, if your app changes it (default 5m)", parseDuration('--orphan-after'), ORPHAN_AFTER_MS)
    .option('--json', 'as JSON: [{ name, queue, cron, timeZone, payload, missedFires, priority, maxAttempts, paused, nextFireAt, lastFireAt, source, orphaned, ... }]')
    .action(
      run(async (connection, _args, options: { orphanAfter: number; json?: boolean }) => {
        const { service } = await serviceOf(connection, options.orphanAfter);
        const all = await service.schedules();
        if (options.json) return printJson(all);
        if (all.length === 0) return print('no schedules');
        printTable(
          ['name', 'queue', 'cron', 'time zone', 'next fire', 'last fire', 'state', 'source'],
          all.map((s) => [s.name, s.queue, s.cron, s.timeZone, time(s.nextFireAt), time(s.lastFireAt), stateOf(s), s.source]),
        );
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
        if (!options.yes) await confirm(`remove the schedule ${name} (queue ${schedule.queue}, cron ${JSON.stringify(schedule.cron)})`, { dryRun: false });
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
    .description("enqueue one fire of the schedule now: the job a tick would enqueue (payload with _schedule, its priority and attempts); the schedule's own next fire does not move")
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
  return schedule.orphaned ? 'orphaned' : 'active';
}
