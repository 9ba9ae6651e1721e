import { InvalidArgumentError, type Command } from 'commander';
import { FINAL_FLOW_STATUSES, FLOW_STATUSES, type FlowJobRecord, type FlowRecord, type FlowStatus } from '../../flows/flow.interfaces.js';
import { isBigintId } from '../../utils/bigint-id.js';
import { BAD_FLOW_ID, BAD_STATUS, FLOW_NOT_FOUND } from '../cli.messages.js';
import { confirm } from '../confirm.js';
import { parseInteger } from '../duration.js';
import { CliError, UsageError } from '../errors.js';
import { count, oneLine, print, printJson, printTable, time } from '../output.js';
import type { Run } from '../run.js';

/**
 * Flows (QueueService.enqueueFlow: jobs that depend on jobs), through the library's FlowStore: the statements of
 * store/flow.sql.ts that QueueService.flows, getFlow and cancelFlow run, so a flow cancelled here ends exactly as
 * an app's cancelFlow would end it.
 */
export function registerFlows(program: Command, run: Run): void {
  const flows = program.command('flows').description('list, show and cancel flows (jobs that depend on jobs: QueueService.enqueueFlow)');

  flows
    .command('list')
    .description('flows, newest first: name, status, how many jobs, when created and finished, why one failed')
    .option('-s, --status <status>', `flows in this status (${FLOW_STATUSES.join(', ')})`, flowStatus)
    .option('--limit <n>', 'flows to list (1 to 10,000)', parseInteger('--limit', 1, 10_000), 50)
    .option('--json', 'as JSON lines, one flow per line')
    .action(
      run(async (connection, _args, options: { status?: FlowStatus; limit: number; json?: boolean }) => {
        const list = await connection.flowStore().listFlows(options.status ?? null, options.limit);
        if (options.json) {
          for (const flow of list) print(JSON.stringify(flow));
          return;
        }
        if (list.length === 0) return print('no flows');
        printTable(
          ['id', 'name', 'status', 'jobs', 'created at', 'finished at', 'reason'],
          list.map((f) => [f.id, f.name ?? '', f.status, count(f.jobs), time(f.createdAt), time(f.finishedAt), f.reason ?? '']),
        );
        if (list.length === options.limit) print(`the newest ${count(options.limit)} shown: raise --limit for more`);
      }),
    );

  flows
    .command('show')
    .description('one flow: its state, every job (status, attempts, what a blocked one waits for, what a compensation undoes) and every edge')
    .argument('<id>', 'the flow id')
    .option('--json', 'as JSON: the flow as QueueService.getFlow returns it ({ id, name, status, reason, ..., jobs: [...], edges: [...] })')
    .action(
      run(async (connection, [id], options: { json?: boolean }) => {
        const flow = await connection.flowStore().getFlow(flowId(id));
        if (!flow) throw new CliError(FLOW_NOT_FOUND(id));
        if (options.json) return printJson(flow);
        printFlow(flow);
      }),
    );

  flows
    .command('cancel')
    .description("cancel an unfinished flow: its queued and blocked jobs never run, its running ones are told to abort (their outcome is refused), no compensation runs; asks first, --yes in a script")
    .argument('<id>', 'the flow id')
    .option('-y, --yes', 'do not ask for confirmation (needed when stdin is not a terminal)')
    .action(
      run(async (connection, [id], options: { yes?: boolean }) => {
        const store = connection.flowStore();
        const flow = await store.getFlow(flowId(id));
        if (!flow) throw new CliError(FLOW_NOT_FOUND(id));
        if (FINAL_FLOW_STATUSES.includes(flow.status)) return print(`flow ${id} has already finished (${flow.status}): nothing to cancel`);
        if (!options.yes) await confirm(`cancel flow ${describe(flow)}: ${liveJobs(flow.jobs)}`, { dryRun: false });
        const outcome = await store.cancelFlow(id);
        // Between the question and the answer the flow may have finished on its own: then nothing was cancelled.
        if (!outcome) return print(`flow ${id} finished meanwhile: nothing cancelled`);
        print(`cancelled flow ${id}: ${count(outcome.cancelled)} job(s) cancelled, ${count(outcome.signalled)} running job(s) told to abort`);
      }),
    );
}

function flowStatus(value: string): FlowStatus {
  if (!(FLOW_STATUSES as string[]).includes(value)) throw new InvalidArgumentError(BAD_STATUS(value, FLOW_STATUSES));
  return value as FlowStatus;
}

export function flowId(id: string): string {
  if (!isBigintId(id)) throw new UsageError(BAD_FLOW_ID(id));
  return id;
}

/** "12 (checkout, running)": the id, the name when it has one, the status. */
function describe(flow: FlowRecord): string {
  return `${flow.id} (${flow.name === null ? '' : `${JSON.stringify(flow.name)}, `}${flow.status})`;
}

/** What a cancel stops: "2 queued, 3 blocked and 1 running job(s)". */
function liveJobs(jobs: FlowJobRecord[]): string {
  const live = (['queued', 'blocked', 'processing'] as const).map((s) => [s, jobs.filter((j) => j.status === s).length] as const).filter(([, n]) => n > 0);
  if (live.length === 0) return 'none of its jobs can still run';
  const parts = live.map(([s, n]) => `${count(n)} ${s === 'processing' ? 'running' : s}`);
  return `${parts.length > 1 ? `${parts.slice(0, -1).join(', ')} and ${parts.at(-1)}` : parts[0]} job(s) stop`;
}

function printFlow(flow: FlowRecord): void {
  const refOf = new Map(flow.jobs.map((j) => [j.id, j.ref]));
  const named = (id: string) => `${refOf.get(id) ?? '?'} (${id})`;
  const fields: [string, string][] = [
    ['id', flow.id],
    ['name', flow.name ?? ''],
    ['status', flow.status],
    ['reason', flow.reason ?? ''],
    ['failed job', flow.failedJobId ? named(flow.failedJobId) : ''],
    ['created at', time(flow.createdAt)],
    ['updated at', time(flow.updatedAt)],
    ['finished at', time(flow.finishedAt)],
  ];
  for (const [key, value] of fields) print(`${key.padEnd(12)} ${oneLine(value)}`);
  print();
  if (flow.jobs.length === 0) print('no jobs left (the pruner deletes a finished flow\'s jobs after their retention)');
  else
    printTable(
      ['id', 'ref', 'queue', 'status', 'attempts', 'waiting for', 'compensates', 'last error'],
      flow.jobs.map((j) => [
        j.id,
        j.ref ?? '',
        j.queue,
        j.status,
        `${j.attempts}/${j.maxAttempts}`,
        j.waitingFor.join(', '),
        j.compensates ? named(j.compensates) : '',
        (j.lastError ?? '').split('\n')[0].slice(0, 200),
      ]),
    );
  print();
  if (flow.edges.length === 0) return print('no edges');
  printTable(
    ['parent', 'child', 'on failure', 'edge'],
    flow.edges.map((e) => [named(e.parent), named(e.child), e.onFailure, e.done ? 'resolved' : 'open']),
  );
}
