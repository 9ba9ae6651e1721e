import { PgQueueError } from '../errors/pg-queue.error.js';
import { INVALID_OPTION } from '../pg-queue.messages.js';
import { errorLine } from './error-text.js';
import type { NewJobRow } from '../store/job-store.types.js';
import { queueNameOf, type QueueDefinition } from '../typed/queue-definition.js';
import { assertQueueName, type ResolvedModuleOptions } from './resolve-options.js';
import { checkJobKey } from './job-key.js';
import { serializePayload } from './serialize-payload.js';
import { uniqueFields, type UniqueOptions } from './unique-options.js';

/** The options of one job as enqueue, enqueueMany and enqueueFlow take them (the row they become: buildJobRow). */
export interface JobRowSpec extends UniqueOptions {
  queue: string | QueueDefinition<unknown, unknown>;
  payload: unknown;
  runAt?: Date;
  delayMs?: number;
  priority?: number;
  maxAttempts?: number;
  concurrencyKey?: string;
  lifo?: boolean;
}

const INT32_MAX = 2_147_483_647;
/** The longest delayMs: 1,000 years (of 365.25 days). */
const MAX_DELAY_MS = 31_557_600_000_000;
/** runAt from year 1 to year 9999 (PostgreSQL's timestamptz reaches further back and forward, JavaScript's Date too). */
const RUN_AT_MIN_MS = Date.parse('0001-01-01T00:00:00.000Z');
const RUN_AT_MAX_MS = Date.parse('9999-12-31T23:59:59.999Z');

/** What a job's row takes from its queue's options when its enqueue does not say: see jobDefaultsOf. */
export interface JobDefaults {
  maxAttempts(queue: string): number;
  /** The queue's `fairness.key`, which keys a job enqueued without concurrencyKey. */
  fairnessKey(queue: string): ((payload: unknown) => string) | undefined;
}

/**
 * A job's row, its options checked (each bad one named in a PgQueueError) and its payload serialised; maxAttempts
 * and the key default to the queue's (`defaults`).
 */
export function buildJobRow(spec: JobRowSpec, maxPayloadBytes: number, defaults: JobDefaults): NewJobRow {
  const { payload, runAt, delayMs, priority, maxAttempts, concurrencyKey } = spec;
  const queue = queueNameOf(spec.queue);
  assertQueueName(queue);
  const where = `enqueue("${queue}")`;
  checkRunAt(where, runAt);
  checkDelayMs(where, delayMs);
  checkPriority(where, priority);
  if (maxAttempts !== undefined && (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 1_000)) {
    throw new PgQueueError(INVALID_OPTION(where, 'maxAttempts', maxAttempts, 'an integer from 1 to 1000'));
  }
  if (concurrencyKey !== undefined) checkJobKey(where, 'concurrencyKey', concurrencyKey);
  const row: NewJobRow = {
    queue,
    payloadJson: serializePayload(queue, payload, maxPayloadBytes),
    priority: priority ?? 0,
    // The module's `queues` options apply also where no handler runs (workers: false), as at the worker.
    maxAttempts: maxAttempts ?? defaults.maxAttempts(queue),
    runAt: runAt ?? null,
    delayMs: delayMs ?? 0,
    concurrencyKey: concurrencyKey ?? fairnessKeyOf(where, defaults.fairnessKey(queue), payload),
  };
  // Only a job with unique options pays for them: a plain enqueue builds the same row as before.
  if (spec.uniqueKey !== undefined || spec.onConflict !== undefined || spec.uniqueForMs !== undefined) Object.assign(row, uniqueFields(where, spec));
  // Likewise LIFO (README, LIFO): the row says so only when it is one.
  if (spec.lifo !== undefined) {
    if (typeof spec.lifo !== 'boolean') throw new PgQueueError(INVALID_OPTION(where, 'lifo', spec.lifo, 'true or false'));
    if (spec.lifo) row.lifo = true;
  }
  return row;
}

/** A job's runAt (at enqueue, or changed after: QueueService.changeRunAt), or a clear error naming `where`. */
export function checkRunAt(where: string, runAt: unknown): void {
  if (runAt !== undefined && (!(runAt instanceof Date) || Number.isNaN(runAt.getTime()))) {
    throw new PgQueueError(INVALID_OPTION(where, 'runAt', runAt, 'a valid Date'));
  }
  // Within what PostgreSQL stores (a timestamptz, an interval): beyond, the insert failed with a bare
  // "timestamp out of range" or "interval out of range" that named no option.
  if (runAt !== undefined && (runAt.getTime() < RUN_AT_MIN_MS || runAt.getTime() > RUN_AT_MAX_MS)) {
    throw new PgQueueError(INVALID_OPTION(where, 'runAt', runAt, 'a valid Date from year 1 to 9999'));
  }
}

/** A job's delayMs (at enqueue, or QueueService.changeDelay), or a clear error naming `where`. */
export function checkDelayMs(where: string, delayMs: unknown): void {
  if (delayMs !== undefined && (!Number.isInteger(delayMs) || (delayMs as number) < 0)) {
    throw new PgQueueError(INVALID_OPTION(where, 'delayMs', delayMs, 'a non-negative integer'));
  }
  if (delayMs !== undefined && (delayMs as number) > MAX_DELAY_MS) {
    throw new PgQueueError(INVALID_OPTION(where, 'delayMs', delayMs, `a non-negative integer of at most ${MAX_DELAY_MS} (1,000 years)`));
  }
}

/** A job's priority (at enqueue, or QueueService.changePriority), or a clear error naming `where`. */
export function checkPriority(where: string, priority: unknown): void {
  if (priority !== undefined && (!Number.isInteger(priority) || Math.abs(priority as number) > INT32_MAX)) {
    throw new PgQueueError(INVALID_OPTION(where, 'priority', priority, 'an integer (32-bit)'));
  }
}

/**
 * What a job takes from its queue when its enqueue does not say: maxAttempts from the module's
 * `queues[queue].maxAttempts`, else the queue's @JobHandler maxAttempts, else 5; the key from the `fairness.key` of
 * the same places. The module's options apply also where no handler runs (workers: false).
 */
export function jobDefaultsOf(
  options: Pick<ResolvedModuleOptions, 'queues'>,
  registry: { get(queue: string): { options: { maxAttempts: number; fairness?: { key?: (payload: unknown) => string } | undefined } } | undefined },
): JobDefaults {
  return {
    maxAttempts: (queue) => options.queues[queue]?.maxAttempts ?? registry.get(queue)?.options.maxAttempts ?? 5,
    fairnessKey: (queue) => {
      const declared = options.queues[queue]?.fairness;
      return (typeof declared === 'object' ? declared.key : undefined) ?? registry.get(queue)?.options.fairness?.key;
    },
  };
}

/** The key `fairness.key` gives the payload (none without one), or a clear error: a throw or a bad key refuses the job. */
function fairnessKeyOf(where: string, keyOf: ((payload: unknown) => string) | undefined, payload: unknown): string | null {
  if (keyOf === undefined) return null;
  let key: unknown;
  try {
    key = keyOf(payload);
  } catch (error) {
    throw new PgQueueError(`${where}: the queue's fairness.key threw for this payload: ${errorLine(error)}`, { cause: error });
  }
  return checkJobKey(where, 'the key fairness.key returned', key);
}
