import type { Command } from 'commander';
import { PgQueueError } from '../../errors/pg-queue.error.js';
import { BAD_JSON } from '../cli.messages.js';
import { parseDuration, parseInstant, parseInteger } from '../duration.js';
import { UsageError } from '../errors.js';
import { print } from '../output.js';
import { serializePayload } from '../../utils/serialize-payload.js';
import type { Run } from '../run.js';
import { queueName } from './jobs.js';

interface EnqueueCliOptions {
  priority?: number;
  delay?: number;
  runAt?: string;
  maxAttempts?: number;
  concurrencyKey?: string;
  uniqueKey?: string;
  onConflict?: string;
  uniqueFor?: number;
  maxPayloadBytes?: number;
  lifo?: boolean;
}

/** PgQueueModule's default maxPayloadBytes: the SQL functions have no size limit of their own (the app's option is not in the database). */
const DEFAULT_MAX_PAYLOAD_BYTES = 1_048_576;

/** SQLSTATE invalid_parameter_value: what the SQL enqueue functions raise for a job they refuse. */
const REFUSED_JOB = '22023';

export function registerEnqueue(program: Command, run: Run): void {
  program
    .command('enqueue')
    .description("add a job through the SQL function pg_queue_enqueue, which checks it as QueueService.enqueue does; prints the job's id")
    .argument('<queue>', 'the queue')
    .argument('<json>', 'the payload, as JSON (quote it for the shell): \'{"to":"a@example.com"}\'')
    .option('--priority <n>', 'higher runs first (default 0)', parseInteger('--priority', -2_147_483_647, 2_147_483_647))
    .option('--delay <duration>', 'run no earlier than this long from now (database clock), e.g. 10m', parseDuration('--delay'))
    .option('--run-at <iso-date>', 'run no earlier than this instant, e.g. 2026-12-01T08:00:00Z')
    .option('--max-attempts <n>', 'attempts before the job fails for good (default 5)', parseInteger('--max-attempts', 1, 1_000))
    .option('--concurrency-key <key>', "the key the queue's concurrencyPerKey limit counts the job under (README: Limits)")
    .option('--unique-key <key>', 'enqueue only if no queued or running job of the queue holds this key')
    .option('--on-conflict <mode>', 'with --unique-key: keep, replace, keep-run-at or queue-after (README: Unique jobs)')
    .option('--unique-for <duration>', 'with --unique-key: the key is held this long after the enqueue, whatever became of the job', parseDuration('--unique-for'))
    .option('--lifo', 'last in, first out: claimed before the FIFO jobs of its priority, the newest LIFO job first (README: LIFO)')
    .option('--max-payload-bytes <n>', "the module's maxPayloadBytes, if your app sets it (default 1 MiB)", parseInteger('--max-payload-bytes', 2, 256 * 1_048_576))
    .action(
      run(async (connection, [queue, json], options: EnqueueCliOptions) => {
        let payload: unknown;
        try {
          payload = JSON.parse(json);
        } catch (error) {
          throw new UsageError(BAD_JSON((error as Error).message));
        }
        const runAt = options.runAt === undefined ? undefined : parseInstant('--run-at', options.runAt);
        queueName(queue);
        // The payload's own checks (what jsonb cannot store, the size), which the database cannot make: the size
        // limit is the app's option. Every other check is the SQL function's, as for any SQL producer.
        let payloadJson: string;
        try {
          payloadJson = serializePayload(queue, payload, options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES);
        } catch (error) {
          if (error instanceof PgQueueError) throw new UsageError(error.message);
          throw error;
        }
        let result: { id: string; duplicate: boolean; replaced: boolean };
        try {
          result = await connection.adminStore().enqueue({
            queue,
            payloadJson,
            runAt,
            delayMs: options.delay,
            priority: options.priority,
            maxAttempts: options.maxAttempts,
            concurrencyKey: options.concurrencyKey,
            uniqueKey: options.uniqueKey,
            onConflict: options.onConflict,
            uniqueForMs: options.uniqueFor,
            lifo: options.lifo,
          });
        } catch (error) {
          if ((error as { code?: unknown }).code === REFUSED_JOB) throw new UsageError((error as Error).message);
          throw error;
        }
        print(result.duplicate ? `duplicate: job ${result.id} holds the key${result.replaced ? ' (its payload replaced)' : ''}` : `enqueued job ${result.id}`);
      }),
    );
}
