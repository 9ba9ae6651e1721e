import type { ClientBase, Pool, PoolClient } from 'pg';
import type { JobStatus } from '../interfaces/job.interface.js';
import * as claim from './claim.store.js';
import * as enqueue from './enqueue.store.js';
import { EventStore } from './events.store.js';
import { FairnessStore } from './fairness.store.js';
import { FlowStore } from './flow.store.js';
import { HistoryStore } from './history.store.js';
import { InstanceStore } from './instance.store.js';
import * as control from './job-control.store.js';
import * as limits from './queue-limits.store.js';
import * as read from './job-read.store.js';
import { JobStatements } from './job-statements.js';
import type { CompletedAttempt, FailedAttempt, JobStoreOptions, SettledBatch } from './job-store.types.js';
import * as maintenance from './maintenance.store.js';
import * as settle from './settle.store.js';
import { StepStore } from './step.store.js';
import { WaitStore } from './wait.store.js';

/** A verb function's parameters after the statements it runs on. */
type Args<F> = F extends (db: JobStatements, ...args: infer A) => unknown ? A : never;

/**
 * The queue's table access, one method per statement (Table+Verb, as River names them). Callers never
 * write SQL. Statements go to the queue's own pg Pool, mostly as named (prepared) statements unless a
 * transaction pooler sits in between; enqueue inside a caller's transaction goes through that
 * transaction's EntityManager.
 *
 * A facade: each method runs one function of a verb file (enqueue.store.ts, claim.store.ts, settle.store.ts,
 * maintenance.store.ts, job-read.store.ts, job-control.store.ts), where its statement's rows are built and read;
 * the statements themselves are in the matching *.sql.ts.
 */
export class JobStore {
  private readonly db: JobStatements;
  /** The statements of flows (jobs that depend on jobs), on the same pool. */
  readonly flows: FlowStore;
  /** The statements of durable steps (job.step, job.sleep), on the same pool. */
  readonly steps: StepStore;
  /** The instances registry's statements (README: "Instances"), on the same pool. */
  readonly instances: InstanceStore;
  /** The statements of whyNotRunning (README: "Why a job is not running"), on the same pool. */
  readonly waits: WaitStore;
  /** Partitioned history's statements (README: "Long retention: partitioned history"), on the same pool. */
  readonly history: HistoryStore;
  /** Fair share weights stored at runtime (README: "Fair share across keys"), on the same pool. */
  readonly fairness: FairnessStore;
  /** The event stream's statements (README: "Event stream"), on the same pool. */
  readonly events: EventStore;

  constructor(
    private readonly pool: Pool,
    options: JobStoreOptions = {},
  ) {
    this.db = new JobStatements(pool, options);
    this.flows = new FlowStore(pool, { transactionPooler: options.transactionPooler });
    this.steps = new StepStore(pool, { transactionPooler: options.transactionPooler });
    this.instances = new InstanceStore(pool, { transactionPooler: options.transactionPooler });
    this.waits = new WaitStore(pool, { transactionPooler: options.transactionPooler });
    this.history = new HistoryStore(pool, { transactionPooler: options.transactionPooler });
    this.fairness = new FairnessStore(pool, { transactionPooler: options.transactionPooler });
    this.events = new EventStore(pool, { transactionPooler: options.transactionPooler });
  }

  // Enqueue (enqueue.store.ts)
  insertJob(...a: Args<typeof enqueue.insertJob>) { return enqueue.insertJob(this.db, ...a); }
  insertEagerJob(...a: Args<typeof enqueue.insertEagerJob>) { return enqueue.insertEagerJob(this.db, ...a); }
  insertJobs(...a: Args<typeof enqueue.insertJobs>) { return enqueue.insertJobs(this.db, ...a); }
  insertKeyedJobs(...a: Args<typeof enqueue.insertKeyedJobs>) { return enqueue.insertKeyedJobs(this.db, ...a); }
  wakeQueues(queues: string[], client?: ClientBase) { return enqueue.wakeQueues(this.db, queues, client); }
  insertJobsOn(client: PoolClient, rows: Parameters<typeof enqueue.insertJobsOn>[1]) { return enqueue.insertJobsOn(client, rows); }

  // Claim (claim.store.ts)
  claimJobs(...a: Args<typeof claim.claimJobs>) { return claim.claimJobs(this.db, ...a); }
  claimLimitedJobs(...a: Args<typeof claim.claimLimitedJobs>) { return claim.claimLimitedJobs(this.db, ...a); }

  // Settle (settle.store.ts)
  /**
   * Returns the ids fenced out (this worker no longer held them); every other job is completed. `deleteRows`
   * deletes instead of keeping them (and their results). A batch where no job has a result or unwritten
   * progress runs the plain statement; otherwise the whole batch takes the variant that also writes those.
   */
  async completeJobs(workerId: string, jobs: CompletedAttempt[], deleteRows = false): Promise<Set<string>> {
    return (await this.settleCompletions(workerId, jobs, deleteRows)).answer;
  }
  settleCompletions(...a: Args<typeof settle.settleCompletions>) { return settle.settleCompletions(this.db, ...a); }
  settleCompletionInTransaction(...a: Parameters<typeof settle.settleCompletionInTransaction>) { return settle.settleCompletionInTransaction(...a); }
  /** Returns each accepted id with the status it ended in (queued for a retry, failed when dead-lettered). */
  async failJobs(workerId: string, jobs: FailedAttempt[]): Promise<Map<string, JobStatus>> {
    return (await this.settleFailures(workerId, jobs)).answer;
  }
  settleFailures(...a: Args<typeof settle.settleFailures>): Promise<SettledBatch<Map<string, JobStatus>>> { return settle.settleFailures(this.db, ...a); }
  snoozeJobs(...a: Args<typeof settle.snoozeJobs>) { return settle.snoozeJobs(this.db, ...a); }
  extendLeases(...a: Args<typeof settle.extendLeases>) { return settle.extendLeases(this.db, ...a); }
  markStarted(...a: Args<typeof settle.markStarted>) { return settle.markStarted(this.db, ...a); }
  releaseJobs(...a: Args<typeof settle.releaseJobs>) { return settle.releaseJobs(this.db, ...a); }

  // Maintenance (maintenance.store.ts)
  rescueExpiredLeases() { return maintenance.rescueExpiredLeases(this.db); }
  deleteFinishedBefore(...a: Args<typeof maintenance.deleteFinishedBefore>) { return maintenance.deleteFinishedBefore(this.db, ...a); }
  deleteExpiredJobKeys(...a: Args<typeof maintenance.deleteExpiredJobKeys>) { return maintenance.deleteExpiredJobKeys(this.db, ...a); }
  stepStrandedSuccessors(...a: Args<typeof maintenance.stepStrandedSuccessors>) { return maintenance.stepStrandedSuccessors(this.db, ...a); }

  // Reads (job-read.store.ts)
  markAwaited(...a: Args<typeof read.markAwaited>) { return read.markAwaited(this.db, ...a); }
  jobOutcomes(...a: Args<typeof read.jobOutcomes>) { return read.jobOutcomes(this.db, ...a); }
  getJob(...a: Args<typeof read.getJob>) { return read.getJob(this.db, ...a); }
  jobAttempts(...a: Args<typeof read.jobAttempts>) { return read.jobAttempts(this.db, ...a); }
  countByStatus(...a: Args<typeof read.countByStatus>) { return read.countByStatus(this.db, ...a); }
  databaseIdentity() { return read.databaseIdentity(this.db); }

  // An operator's actions (job-control.store.ts)
  cancelJob(...a: Args<typeof control.cancelJob>) { return control.cancelJob(this.db, ...a); }
  pauseQueue(...a: Args<typeof control.pauseQueue>) { return control.pauseQueue(this.db, ...a); }
  resumeQueue(...a: Args<typeof control.resumeQueue>) { return control.resumeQueue(this.db, ...a); }
  pausedQueues() { return control.pausedQueues(this.db); }
  retryJob(...a: Args<typeof control.retryJob>) { return control.retryJob(this.db, ...a); }
  changeJob(...a: Args<typeof control.changeJob>) { return control.changeJob(this.db, ...a); }
  jobQueue(...a: Args<typeof control.jobQueue>) { return control.jobQueue(this.db, ...a); }

  // Limits changed at runtime and a partner's 429 (queue-limits.store.ts)
  setQueueLimits(...a: Args<typeof limits.setQueueLimits>) { return limits.setQueueLimits(this.db, ...a); }
  queueSettings(...a: Args<typeof limits.queueSettings>) { return limits.queueSettings(this.db, ...a); }
  blockQueue(...a: Args<typeof limits.blockQueue>) { return limits.blockQueue(this.db, ...a); }
  resetBackoff(...a: Args<typeof limits.resetBackoff>) { return limits.resetBackoff(this.db, ...a); }
  markLimited(...a: Args<typeof limits.markLimited>) { return limits.markLimited(this.db, ...a); }
}

export type {
  CancelResult,
  ClaimedJob,
  ClaimLimits,
  ClaimResult,
  CompletedAttempt,
  DatabaseIdentityRow,
  EnqueueOutcome,
  FailedAttempt,
  JobOutcome,
  JobRef,
  JobStoreOptions,
  NewJobRow,
  OnConflict,
  SettledBatch,
  SnoozedAttempt,
} from './job-store.types.js';
