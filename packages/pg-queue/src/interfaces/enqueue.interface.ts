import type { TransactionClient } from '../transactions/transaction-client.js';
import type { QueueDefinition } from '../typed/queue-definition.js';
import type { UniqueOptions } from '../utils/unique-options.js';

export interface EnqueueOptions extends UniqueOptions {
  /**
   * The caller's transaction: the job commits or rolls back with the caller's writes, and workers are woken at that
   * commit. A TypeORM EntityManager, a pg PoolClient after BEGIN, a Prisma interactive transaction's client, a
   * Kysely Transaction, a Drizzle transaction or a MikroORM EntityManager (docs/guides/transactional-enqueue.md).
   * Default: the surrounding `@Transactional()` call's with the module option ambientTransactions, else none.
   */
  manager?: TransactionClient;
  /** Run no earlier than this instant. */
  runAt?: Date;
  /** Run no earlier than this long from now (database clock). Ignored when runAt is given. */
  delayMs?: number;
  /** Higher runs first. Default 0. */
  priority?: number;
  /** Default: the module options' `queues[queue].maxAttempts`, else the queue's @JobHandler maxAttempts, else 5. */
  maxAttempts?: number;
  /** The key the queue's `concurrencyPerKey` limit counts this job under (a tenant, an account). Default: none. */
  concurrencyKey?: string;
  /**
   * Last in, first out: this job is claimed before the FIFO jobs of its priority, the newest LIFO job first (README,
   * "LIFO"). A queue whose handler has `lifo: true` takes every job that way. Default false.
   */
  lifo?: boolean;
}

/** One job of enqueueMany, named by its queue's name (a job may also name a definition: see JobSpecs). */
export interface JobSpec<TPayload = unknown> extends Omit<EnqueueOptions, 'manager'> {
  queue: string;
  payload: TPayload;
}

/** A job of enqueueMany as the service reads it: named by its queue's name or definition. */
export type AnyJobSpec = Omit<JobSpec, 'queue'> & { queue: string | QueueDefinition<unknown, unknown> };

/**
 * The jobs of an enqueueMany call, each checked against its own queue: a job whose queue is a definition must
 * carry that definition's payload type (jobs of several definitions may be mixed); a job named by a string
 * takes any payload.
 */
export type JobSpecs<T extends readonly unknown[]> = {
  [K in keyof T]: Omit<EnqueueOptions, 'manager'> & { queue: string | QueueDefinition<T[K], unknown>; payload: NoInfer<T[K]> };
};

/** What an enqueue came to: `enqueueUnique` and `enqueueManyUnique` return it. */
export interface EnqueueResult {
  /** The job that holds the key: the one this call added, or the one that held it already (a window's job may since have been pruned). */
  id: string;
  /** true when a job already held the key, so this call added none. */
  duplicate: boolean;
  /** true when this duplicate changed the queued holder (onConflict 'replace' or 'keep-run-at'), or the waiting successor ('queue-after'). */
  replaced: boolean;
  /**
   * Set (true) when the key's holder was running and this call, with onConflict 'queue-after', made the successor
   * that waits for it (`duplicate: false`) or gave its payload to the successor already waiting (`duplicate: true,
   * replaced: true`): `id` is the successor's. Absent otherwise.
   */
  queuedAfter?: true;
}
