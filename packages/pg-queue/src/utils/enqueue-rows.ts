// What QueueService's enqueues do with their arguments before the store sees them: the rows of a batch, checked and
// validated, and what an insert's answer means to the caller (its result, the queues to wake).
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { AnyJobSpec, EnqueueResult } from '../interfaces/enqueue.interface.js';
import type { NewJobRow } from '../store/job-store.types.js';
import type { KeyedOutcome } from '../store/unique-rows.js';
import { checkPayloads, validatorOf, type PayloadToCheck } from '../typed/payload-validators.js';
import type { QueueDefinition } from '../typed/queue-definition.js';

/** One job's row (buildJobRow with the module's options). */
export type ToRow = (spec: AnyJobSpec) => NewJobRow;

/** Runs the queue's validator, if it has one; a promise only when the validator is async. */
export function validatePayload(method: string, queue: string, payload: unknown): void | Promise<void> {
  const validate = validatorOf(queue);
  if (validate) return checkPayloads(`${method}("${queue}")`, [{ queue, payload, validate }]);
}

/** The rows of an enqueueMany-style call, checked and validated; none for an empty call. */
export async function batchRows(specs: readonly AnyJobSpec[], method: string, toRow: ToRow): Promise<NewJobRow[]> {
  if (!Array.isArray(specs)) throw new PgQueueError(`${method} expects an array of { queue, payload, ...options }.`);
  if (specs.length === 0) return [];
  const rows = toRows(specs, method, toRow);
  await validateMany(method, specs, rows);
  return rows;
}

/** Every job's validator before any row is stored: one refused payload refuses the whole batch. */
function validateMany(method: string, specs: readonly AnyJobSpec[], rows: NewJobRow[]): void | Promise<void> {
  let checks: PayloadToCheck[] | undefined;
  for (let i = 0; i < rows.length; i++) {
    const validate = validatorOf(rows[i].queue);
    if (validate) (checks ??= []).push({ queue: rows[i].queue, payload: specs[i].payload, validate, index: i });
  }
  if (checks) return checkPayloads(method, checks);
}

function toRows(jobs: readonly AnyJobSpec[], method: string, toRow: ToRow): NewJobRow[] {
  return jobs.map((job, i) => {
    try {
      return toRow(job);
    } catch (error) {
      if (error instanceof PgQueueError) throw new PgQueueError(`${method}: job #${i}: ${error.message}`);
      throw error;
    }
  });
}

/** The outcomes of a keyed insert, as they are (the `outcomesOf` of QueueService.woken). */
export const keyed = (outcomes: KeyedOutcome[]) => outcomes;

/** The queues an enqueueMany-style call names, for routing (malformed calls are refused by the owner's checks). */
export function queuesOf(jobs: unknown): (string | QueueDefinition<unknown, unknown>)[] {
  return Array.isArray(jobs) ? jobs.map((job: AnyJobSpec | null) => job?.queue as string) : [];
}

/** A keyed insert's outcome as enqueueUnique answers it. */
export function toResult({ id, outcome }: KeyedOutcome): EnqueueResult {
  if (outcome === 'successor') return { id, duplicate: false, replaced: false, queuedAfter: true };
  if (outcome === 'successor-replaced') return { id, duplicate: true, replaced: true, queuedAfter: true };
  return { id, duplicate: outcome !== 'inserted', replaced: outcome === 'replaced' };
}
