import type { DataSource } from 'typeorm';
import { JobAbortedError } from '../errors/pg-queue.error.js';
import type { Job } from '../interfaces/job.interface.js';
import type { JobStore } from '../store/job.store.js';
import type { JobAttempt } from './job-attempt.js';
import { storedResult } from './stored-result.js';

/**
 * What a transactional handler's attempt needs: the module's DataSource (PgQueueConnection.appDataSource, the one its
 * pool was dialled from: the job's own database, since the completion's fence, id + workerId + fence token, cannot
 * tell two databases apart), the queue's store, and the settle's settings.
 */
export interface TransactionalDeps {
  dataSource: DataSource;
  store: JobStore;
  workerId: string;
  maxResultBytes: number;
  /** completedRetentionMs 0: the completion deletes the row, as the outcome writer's would. */
  deleteCompleted: boolean;
}

/** A completion the handler's own transaction committed: the flow jobs it finished, for the second look. */
export interface CommittedCompletion {
  flowJobs: string[] | undefined;
}

/**
 * A transactional handler (`transactional: true`) as the worker calls it: the handler runs inside a transaction of
 * the app's DataSource with `job.manager` set to its EntityManager, and the job's completion is written in the same
 * transaction, by the same fenced statement the outcome writer uses. So the handler's writes and the completion
 * commit together or not at all:
 * - the attempt was aborted meanwhile (lease lost, cancelled, timed out, shutdown): rolled back, nothing written;
 * - the completion is fenced out (the sweeper gave the job to another worker while this one was frozen): rolled
 *   back, the handler's writes with it;
 * - the handler threw, or its result cannot be stored: rolled back; the worker records the failure afterwards, on
 *   its own pool, outside the rolled-back transaction.
 * Only once the transaction has committed does `onCommitted` learn it (a failed COMMIT is a failure, whose write is
 * fenced out if the commit did land after all). Children a handler spawned are created in that transaction too.
 */
export function transactionalHandle(
  handle: (job: Job) => unknown,
  deps: TransactionalDeps,
  onCommitted: (job: JobAttempt, committed: CommittedCompletion) => void,
): (job: Job) => Promise<unknown> {
  return async (job: Job) => {
    const attempt = job as JobAttempt;
    let committed: CommittedCompletion | undefined;
    const result = await deps.dataSource.transaction(async (manager) => {
      attempt.manager = manager;
      // Aborted while the transaction opened (its connection waited, or this process froze past the timeout or the
      // lease): the handler is not called at all; its job may run elsewhere already (the simulation's seed 46).
      const before = attempt.abortReason();
      if (before !== undefined) throw before;
      const value = await handle(job);
      const aborted = attempt.abortReason();
      if (aborted !== undefined) throw aborted;
      let resultJson: string | undefined;
      if (value != null) {
        const stored = storedResult(job.queue, job.id, value, deps.maxResultBytes);
        if ('refused' in stored) throw stored.refused;
        resultJson = stored.json;
      }
      const completed = { id: job.id, token: attempt.token, resultJson, progressJson: attempt.progressJson, logEntry: attempt.logEntry };
      if (attempt.spawned) {
        const spawned = await deps.store.flows.completeSpawning(deps.workerId, completed, attempt.spawned, manager);
        if (!spawned.completed) throw lost(job);
        committed = { flowJobs: [job.id] };
      } else {
        const settled = await deps.store.settleCompletionInTransaction(manager, deps.workerId, completed, deps.deleteCompleted);
        if (settled.answer.has(job.id)) throw lost(job);
        committed = { flowJobs: settled.flowJobs };
      }
      // From here the row is completed in this transaction and locked by it: a heartbeat that waits on that lock and
      // then finds the row no longer processing saw this commit (QueueWorker.beatAnswered), not a lost lease.
      attempt.settledInTransaction = true;
      return value;
    });
    if (committed) onCommitted(attempt, committed);
    return result;
  };
}

function lost(job: Job): JobAbortedError {
  return new JobAbortedError(`job ${job.id} (${job.queue}): this attempt no longer holds the job (its lease was lost, or it was cancelled); its transaction is rolled back`);
}
