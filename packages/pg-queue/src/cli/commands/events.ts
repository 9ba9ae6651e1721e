import type { Command } from 'commander';
import { PgQueueError } from '../../errors/pg-queue.error.js';
import type { QueueEvent } from '../../events/queue-event.interface.js';
import { UsageError } from '../errors.js';
import { note, oneLine, print } from '../output.js';
import type { Run } from '../run.js';
import { queueName } from './jobs.js';

interface EventsOptions {
  after?: string;
  queue?: string[];
  type?: string[];
  follow?: boolean;
  json?: boolean;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

function line(e: QueueEvent): string {
  const subject = e.jobId === null ? `flow ${e.flowId}` : `job ${e.jobId}${e.attempt === null ? '' : ` attempt ${e.attempt}`}`;
  return [e.id, e.at.toISOString(), e.queue, e.type, subject, e.detail === null ? '' : oneLine(e.detail)].join('  ').trimEnd();
}

export function registerEvents(program: Command, run: Run): void {
  program
    .command('events')
    .description('the recorded events of the queues that record them (README: Event stream), oldest first, in commit-safe order; --follow waits for new ones until interrupted')
    .option('--after <id>', "only events after this event id (the first column); default: from the oldest kept ('0-0')")
    .option('--queue <queue>', 'only events of this queue (repeatable)', collect)
    .option('--type <type>', 'only events of this type (repeatable): enqueued, started, completed, failed, retrying, dead, stalled, returned, cancelled, flow-finished', collect)
    .option('--follow', 'keep reading new events (polled every 500 ms) until Ctrl-C')
    .option('--json', 'one JSON object per line')
    .action(
      run(async (connection, _args, options: EventsOptions) => {
        // Loaded when the command runs: the stream's module brings @nestjs/common (its logger), which would add about
        // 0.4 s to the start of every other command.
        const { checkStreamOptions, eventStream } = await import('../../events/event-stream.js');
        const settings = (() => {
          try {
            return checkStreamOptions({
              after: options.after ?? '0-0',
              queues: options.queue?.map(queueName),
              types: options.type as never,
              pollIntervalMs: 500,
            });
          } catch (error) {
            throw error instanceof PgQueueError ? new UsageError(error.message.replace('events() option ', '--').replace(/^Invalid --/, 'invalid --')) : error;
          }
        })();
        const store = connection.jobStore().events;
        const show = (e: QueueEvent) => print(options.json ? JSON.stringify(e) : line(e));
        if (!options.follow) {
          // Until caught up: a page shorter than its size.
          let position = settings.after!;
          for (;;) {
            const page = await store.readPage(position, settings, settings.pageSize);
            page.events.forEach(show);
            if (page.last) position = page.last;
            if (page.read < settings.pageSize) return;
          }
        }
        const stop = new AbortController();
        const interrupt = () => stop.abort();
        process.once('SIGINT', interrupt);
        process.once('SIGTERM', interrupt);
        note('following events (Ctrl-C to stop)');
        try {
          for await (const e of eventStream(store, { ...settings, signal: stop.signal }, { config: undefined, logger: console })) show(e);
        } finally {
          process.off('SIGINT', interrupt);
          process.off('SIGTERM', interrupt);
        }
      }),
    );

  program
    .command('record-events')
    .description('starts (or, with --off, stops) recording the events of a queue, for every process (README: Event stream); prints the recording queues')
    .argument('<queue>', 'the queue')
    .option('--off', 'stop recording (the events kept stay until the pruner removes them)')
    .action(
      run(async (connection, [queue], options: { off?: boolean }) => {
        const queues = await connection.jobStore().events.record(queueName(queue), !options.off);
        print(queues.length === 0 ? 'no queue records events' : `queues recording events: ${queues.join(', ')}`);
      }),
    );
}
