import { Inject, Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { JobHandlerRegistry } from './discovery/job-handler.registry.js';
import { PgQueueError } from './errors/pg-queue.error.js';
import type { JobRecord, QueueStats } from './interfaces/job.interface.js';
import { INVALID_OPTION } from './pg-queue.messages.js';
import { RESOLVED_OPTIONS } from './pg-queue.module-definition.js';
import { JobStore, type CancelResult, type NewJobRow } from './store/job.store.js';
import { assertQueueName, type ResolvedModuleOptions } from './utils/resolve-options.js';
import { serializePayload } from './utils/serialize-payload.js';

export interface EnqueueOptions {
  /** EntityManager of a running transaction: the job commits or rolls back with the caller's writes. */
  manager?: EntityManager;
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
}

export interface JobSpec<TPayload = unknown> extends Omit<EnqueueOptions, 'manager'> {
  queue: string;
  payload: TPayload;
}

const INT32_MAX = 2_147_483_647;

/** What app code injects: enqueue (alone or in the caller's transaction), inspect, cancel, retry. */
@Injectable()
export class QueueService {
  constructor(
    private readonly store: JobStore,
    private readonly registry: JobHandlerRegistry,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  /** Adds one job; returns its id. Pass `manager` to make it part of your transaction. */
  async enqueue<TPayload>(queue: string, payload: TPayload, options: EnqueueOptions = {}): Promise<string> {
    return this.store.insertJob(this.toRow({ ...options, queue, payload }), options.manager);
  }

  /**
   * Adds many jobs in one statement (one round trip, one NOTIFY per queue); returns their ids in order. Past
   * 16 MB of payloads it runs one statement per 16 MB in one transaction: all the jobs are added or none.
   */
  async enqueueMany(jobs: JobSpec[], options: { manager?: EntityManager } = {}): Promise<string[]> {
    if (!Array.isArray(jobs)) throw new PgQueueError('enqueueMany expects an array of { queue, payload, ...options }.');
    if (jobs.length === 0) return [];
    const rows = jobs.map((job, i) => {
      try {
        return this.toRow(job);
      } catch (error) {
        if (error instanceof PgQueueError) throw new PgQueueError(`enqueueMany: job #${i}: ${error.message}`);
        throw error;
      }
    });
    return this.store.insertJobs(rows, options.manager);
  }

  async get<TPayload = unknown>(id: string | number | bigint): Promise<JobRecord<TPayload> | null> {
    return (await this.store.getJob(jobId(id))) as JobRecord<TPayload> | null;
  }

  /**
   * Cancels a queued or running job: a queued job never runs; a running one has its signal aborted and its
   * outcome discarded. Returns 'cancelled', or the status that made it impossible, or 'not-found'.
   */
  async cancel(id: string | number | bigint): Promise<CancelResult> {
    return this.store.cancelJob(jobId(id));
  }

  /** Puts a failed (dead-lettered) or cancelled job back in the queue with a fresh set of attempts. */
  async retry(id: string | number | bigint): Promise<boolean> {
    return this.store.retryJob(jobId(id));
  }

  /** Stops every instance from claiming jobs of this queue (running jobs finish); enqueueing still works. */
  async pause(queue: string): Promise<void> {
    assertQueueName(queue);
    await this.store.pauseQueue(queue);
  }

  /** Lets the queue run again; idle workers wake at once. */
  async resume(queue: string): Promise<void> {
    assertQueueName(queue);
    await this.store.resumeQueue(queue);
  }

  async pausedQueues(): Promise<string[]> {
    return this.store.pausedQueues();
  }

  /** Counts by queue and status. */
  async stats(): Promise<QueueStats> {
    return this.store.countByStatus();
  }

  private toRow(spec: JobSpec): NewJobRow {
    const { queue, payload, runAt, delayMs, priority, maxAttempts, concurrencyKey } = spec;
    assertQueueName(queue);
    const where = `enqueue("${queue}")`;
    if (runAt !== undefined && (!(runAt instanceof Date) || Number.isNaN(runAt.getTime()))) {
      throw new PgQueueError(INVALID_OPTION(where, 'runAt', runAt, 'a valid Date'));
    }
    if (delayMs !== undefined && (!Number.isInteger(delayMs) || delayMs < 0)) {
      throw new PgQueueError(INVALID_OPTION(where, 'delayMs', delayMs, 'a non-negative integer'));
    }
    if (priority !== undefined && (!Number.isInteger(priority) || Math.abs(priority) > INT32_MAX)) {
      throw new PgQueueError(INVALID_OPTION(where, 'priority', priority, 'an integer (32-bit)'));
    }
    if (maxAttempts !== undefined && (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 1_000)) {
      throw new PgQueueError(INVALID_OPTION(where, 'maxAttempts', maxAttempts, 'an integer from 1 to 1000'));
    }
    if (concurrencyKey !== undefined && (typeof concurrencyKey !== 'string' || concurrencyKey.length === 0 || concurrencyKey.length > 512 || concurrencyKey.includes('\0'))) {
      throw new PgQueueError(INVALID_OPTION(where, 'concurrencyKey', concurrencyKey, 'a non-empty string of at most 512 characters, without NUL'));
    }
    return {
      queue,
      payloadJson: serializePayload(queue, payload, this.options.maxPayloadBytes),
      priority: priority ?? 0,
      // The module's `queues` options apply also where no handler runs (workers: false), as at the worker.
      maxAttempts: maxAttempts ?? this.options.queues[queue]?.maxAttempts ?? this.registry.get(queue)?.options.maxAttempts ?? 5,
      runAt: runAt ?? null,
      delayMs: delayMs ?? 0,
      concurrencyKey: concurrencyKey ?? null,
    };
  }
}

const MAX_BIGINT = 9_223_372_036_854_775_807n;

function jobId(id: string | number | bigint): string {
  const text = String(id);
  if (!/^[1-9][0-9]{0,18}$/.test(text) || BigInt(text) > MAX_BIGINT) {
    throw new PgQueueError(`Invalid job id ${JSON.stringify(text)}: expected a positive integer within bigint range.`);
  }
  return text;
}
