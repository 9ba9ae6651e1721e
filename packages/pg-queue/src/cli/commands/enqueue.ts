import type { Command } from 'commander';
import { PgQueueError } from '../../errors/pg-queue.error.js';
import { BAD_JSON } from '../cli.messages.js';
import { parseDuration, parseInteger } from '../duration.js';
import { UsageError } from '../errors.js';
import { print } from '../output.js';
import { queueServiceOf } from '../queue-service.js';
import type { Run } from '../run.js';
import { queueName } from './jobs.js';

interface EnqueueCliOptions {
  priority?: number;
  delay?: number;
  runAt?: string;
  maxAttempts?: number;
  uniqueKey?: string;
  onConflict?: 'keep' | 'replace' | 'keep-run-at';
  uniqueFor?: number;
  maxPayloadBytes?: number;
}

export function registerEnqueue(program: Command, run: Run): void {
  program
    .command('enqueue')
    .description("add a job, checked as QueueService.enqueue checks it (payload, options); prints the job's id")
    .argument('<queue>', 'the queue')
    .argument('<json>', 'the payload, as JSON (quote it for the shell): \'{"to":"a@example.com"}\'')
    .option('--priority <n>', 'higher runs first (default 0)', parseInteger('--priority', -2_147_483_647, 2_147_483_647))
    .option('--delay <duration>', 'run no earlier than this long from now (database clock), e.g. 10m', parseDuration('--delay'))
    .option('--run-at <iso-date>', 'run no earlier than this instant, e.g. 2026-12-01T08:00:00Z')
    .option('--max-attempts <n>', 'attempts before the job fails for good (default 5)', parseInteger('--max-attempts', 1, 1_000))
    .option('--unique-key <key>', 'enqueue only if no queued or running job of the queue holds this key')
    .option('--on-conflict <mode>', 'with --unique-key: keep, replace or keep-run-at (README: Unique jobs)')
    .option('--unique-for <duration>', 'with --unique-key: the key is held this long after the enqueue, whatever became of the job', parseDuration('--unique-for'))
    .option('--max-payload-bytes <n>', "the module's maxPayloadBytes, if your app sets it (default 1 MiB)", parseInteger('--max-payload-bytes', 2, 256 * 1_048_576))
    .action(
      run(async (connection, [queue, json], options: EnqueueCliOptions) => {
        let payload: unknown;
        try {
          payload = JSON.parse(json);
        } catch (error) {
          throw new UsageError(BAD_JSON((error as Error).message));
        }
        let runAt: Date | undefined;
        if (options.runAt !== undefined) {
          runAt = new Date(options.runAt);
          if (Number.isNaN(runAt.getTime())) throw new UsageError(`--run-at ${JSON.stringify(options.runAt)} is not a date (use ISO 8601, e.g. 2026-12-01T08:00:00Z)`);
        }
        // The service itself, so that the payload and options go through exactly the checks an app's enqueue does.
        const { service } = await queueServiceOf(connection, { maxPayloadBytes: options.maxPayloadBytes });
        const enqueueOptions = {
          priority: options.priority,
          delayMs: options.delay,
          runAt,
          maxAttempts: options.maxAttempts,
          onConflict: options.onConflict,
          uniqueForMs: options.uniqueFor,
        };
        queueName(queue);
        try {
          await enqueue();
        } catch (error) {
          // The service's own checks of the payload and options (a PgQueueError without a cause): bad usage.
          if (error instanceof PgQueueError && error.cause === undefined) throw new UsageError(error.message);
          throw error;
        }
        async function enqueue(): Promise<void> {
          if (options.uniqueKey === undefined && options.onConflict === undefined && options.uniqueFor === undefined) {
            print(`enqueued job ${await service.enqueue(queue, payload, enqueueOptions)}`);
            return;
          }
          const result = await service.enqueueUnique(queue, payload, { ...enqueueOptions, uniqueKey: options.uniqueKey! });
          print(result.duplicate ? `duplicate: job ${result.id} holds the key${result.replaced ? ' (its payload replaced)' : ''}` : `enqueued job ${result.id}`);
        }
      }),
    );
}
