import { Inject, Injectable, Optional } from '@nestjs/common';
import { JobHandlerRegistry } from './discovery/job-handler.registry.js';
import { PgQueueError } from './errors/pg-queue.error.js';
import type { JobRecord, QueueStats } from './interfaces/job.interface.js';
import { RESOLVED_OPTIONS } from './pg-queue.constants.js';
import { JobStore } from './store/job.store.js';
import type { CancelResult, ChangeResult, NewJobRow } from './store/job-store.types.js';
import type { InstanceRecord } from './store/instance.store.js';
import type { WaitExplanation } from './waiting/wait-reasons.js';
import { explainWait } from './waiting/explain-wait.js';
import { assertQueueName, type ResolvedModuleOptions } from './utils/resolve-options.js';
import { buildJobRow, checkDelayMs, checkPriority, checkRunAt, jobDefaultsOf, type JobDefaults } from './utils/job-row.js';
import { flowAccess, type FlowAccess } from './flows/flow-access.js';
import { waitForFlow } from './flows/wait-for-flow.js';
import { checkFlowName } from './flows/plan-flow.js';
import type { EnqueuedFlow, FlowJobSpecs, FlowRecord, FlowSpec, FlowStatus, FlowSummary } from './flows/flow.interfaces.js';
import { serializePayload } from './utils/serialize-payload.js';
import { QueueDatabases, type DatabaseEntry } from './databases/queue-databases.js';
import { ServiceRouting } from './databases/service-routing.js';
import type { ScheduleInfo, ScheduleSpec } from './interfaces/recurring-job.interface.js';
import { DATABASE_NAME, DEFAULT_DATABASE } from './pg-queue.constants.js';
import { RecurringScheduler } from './recurring/recurring-scheduler.js';
import { resolveSchedule } from './recurring/resolve-schedule.js';
import { ScheduleCalls } from './recurring/schedule-calls.js';
import { ScheduleStore } from './store/schedule.store.js';
import { JobWaiters, type WaitOptions } from './waiting/job-waiters.js';
import { checkWaitOptions } from './waiting/check-wait-options.js';
import { batchCall, oneJobCall, setJobId, setKeyedOutcome, traceEnqueue } from './tracing/producer-span.js';
import type { QueueDefinition } from './typed/queue-definition.js';
import { WakeSender } from './waking/wake-sender.js';
import { openEventStream } from './events/event-stream.js';
import type { EventStreamOptions, QueueEvent } from './events/queue-event.interface.js';
import { WorkerPool } from './worker/worker-pool.js';
import { AmbientTransactions } from './transactions/ambient-transactions.js';
import type { CallerTransaction } from './transactions/caller-transaction.js';
import type { TransactionClient } from './transactions/transaction-client.js';
import type { AnyJobSpec, EnqueueOptions, EnqueueResult, JobSpecs } from './interfaces/enqueue.interface.js';
import { batchRows, keyed, queuesOf, toResult, validatePayload } from './utils/enqueue-rows.js';
import { woken } from './waking/woken-insert.js';
import { checkScheduleSpec, jobId, scheduleName } from './utils/call-arguments.js';
import type { QueueLimits, QueueLimitsChange } from './limits/queue-limits.js';
import { QueueSettingsCalls } from './limits/queue-settings-calls.js';

export type { EnqueueOptions, EnqueueResult, JobSpec, JobSpecs } from './interfaces/enqueue.interface.js';

/** What a QueueService reads of each database of the app: its service and workers (the full entry: QueueDatabase). */
export interface ServiceDatabase extends DatabaseEntry {
  readonly service: QueueService;
  readonly workers: WorkerPool;
}

/** What app code injects: enqueue (alone or in the caller's transaction), inspect, cancel, retry. */
@Injectable()
export class QueueService {
  constructor(
    private readonly store: JobStore,
    private readonly registry: JobHandlerRegistry,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedModuleOptions,
    private readonly scheduleStore: ScheduleStore,
    private readonly scheduler: RecurringScheduler,
    /** Absent only where the service is built by hand outside Nest (the CLI's enqueue), which never waits. */
    private readonly waiters?: JobWaiters,
    /** Sends the wake-up of enqueues made without a manager after their commit; absent (the CLI, the testing kit): the trigger's. */
    private readonly wakes?: WakeSender,
    /** This process's workers: a pause made here reaches their buffers at once (other instances hear a NOTIFY). */
    @Optional() private readonly workers?: WorkerPool,
    /** The surrounding @Transactional() call's transaction (option ambientTransactions); absent in the CLI. */
    @Optional() private readonly ambient?: AmbientTransactions,
    /** The app's databases (absent in the CLI): with more than one, each enqueue goes to its queue's database. */
    @Optional() protected readonly databases?: QueueDatabases<ServiceDatabase>,
    /** This service's database: the one its calls by id (get, waitFor, cancel, ...) read. */
    @Optional() @Inject(DATABASE_NAME) readonly databaseName: string = DEFAULT_DATABASE,
  ) {
    this.jobDefaults = jobDefaultsOf(options, registry);
    this.flowKit = flowAccess(store.flows, options, registry);
    this.scheduleCalls = new ScheduleCalls(scheduleStore, scheduler, options.recurring.orphanAfterMs);
    this.settings = new QueueSettingsCalls(store, registry, workers);
    this.routing = new ServiceRouting<QueueService>(this, databases, databaseName, () => store.databaseIdentity());
  }

  private readonly jobDefaults: JobDefaults;
  private readonly flowKit: FlowAccess;
  private readonly scheduleCalls: ScheduleCalls;
  private readonly settings: QueueSettingsCalls;
  /** Which database owns a call's queues, and the check of a caller's transaction, when the app has several. */
  private readonly routing: ServiceRouting<QueueService>;

  /**
   * The QueueService of the PgQueueModule named `name` (its calls by id read that database); this one for its own
   * name. Enqueues need none of this: any QueueService sends each job to its queue's database.
   */
  database(name: string): QueueService {
    return this.routing.database(name);
  }

  /** elsewhere() of a queue named by an operator call (pause, limits, ...), its name checked first. */
  private owning(queue: string): QueueService | undefined {
    assertQueueName(queue);
    return this.routing.elsewhere(queue);
  }

  /**
   * Adds one job; returns its id. Pass `manager` to make it part of your transaction. `queue` is the queue's
   * name or its `defineQueue` definition (then the payload must have the definition's type, and its validator
   * runs first: a refused payload throws InvalidPayloadError and nothing is stored).
   */
  async enqueue<TPayload>(queue: string | QueueDefinition<TPayload, unknown>, payload: NoInfer<TPayload>, options: EnqueueOptions = {}): Promise<string> {
    const owner = this.routing.elsewhere(queue as QueueDefinition<unknown, unknown>);
    if (owner) return owner.enqueue(queue, payload, options);
    const row = this.toRow({ ...options, queue, payload });
    const validated = validatePayload('enqueue', row.queue, payload);
    if (validated) await validated;
    let tx = this.joined(options.manager, 'enqueue', row.queue);
    if (tx instanceof Promise) tx = await tx;
    // A job without a key keeps the plain insert: no other statement, no unique-index entry.
    if (row.uniqueKey == null) {
      // Due now, autocommit, and this process's worker of the queue has a free slot: inserted already claimed by it
      // (docs/concepts.md, Eager start). The slot is checked and kept in one synchronous step: traceEnqueue calls the insert at once.
      // A LIFO job is not (its row must say so, and its queue be marked: insertLifoJobs); it is claimed first anyway.
      const eager = tx === undefined && row.runAt === null && row.delayMs === 0 && row.concurrencyKey === null && !row.lifo ? this.workers?.eagerWorker(row.queue) : undefined;
      if (eager) return traceEnqueue(oneJobCall('enqueue', row.queue), (trace) => eager.startEagerly((claim) => this.store.insertEagerJob(row, claim, trace)), setJobId);
      return woken(this.wakes, tx, [row], (wake) => traceEnqueue(oneJobCall('enqueue', row.queue), (trace) => this.store.insertJob(row, tx, trace, wake), setJobId));
    }
    const [result] = await woken(this.wakes, tx, [row], (wake) => traceEnqueue(oneJobCall('enqueue', row.queue), (trace) => this.store.insertKeyedJobs([row], tx, trace, wake), setKeyedOutcome), keyed);
    return result.id;
  }

  /**
   * Adds one job unless another job holds its `uniqueKey`; says which job holds the key and whether this
   * call was a duplicate (and whether it replaced the holder's payload), without a second query.
   */
  async enqueueUnique<TPayload>(queue: string | QueueDefinition<TPayload, unknown>, payload: NoInfer<TPayload>, options: EnqueueOptions & { uniqueKey: string }): Promise<EnqueueResult> {
    const owner = this.routing.elsewhere(queue as QueueDefinition<unknown, unknown>);
    if (owner) return owner.enqueueUnique(queue, payload, options);
    const row = this.toRow({ ...options, queue, payload });
    if (row.uniqueKey == null) throw new PgQueueError(`enqueueUnique("${row.queue}") needs a uniqueKey; use enqueue() for a job without one.`);
    await validatePayload('enqueueUnique', row.queue, payload);
    const tx = await this.joined(options.manager, 'enqueueUnique', row.queue);
    const [result] = await woken(this.wakes, tx, [row], (wake) => traceEnqueue(oneJobCall('enqueueUnique', row.queue), (trace) => this.store.insertKeyedJobs([row], tx, trace, wake), setKeyedOutcome), keyed);
    return toResult(result);
  }

  /**
   * Adds many jobs in one statement (one round trip, one NOTIFY per queue); returns their ids in order. Past
   * 16 MB of payloads it runs one statement per 16 MB in one transaction: all the jobs are added or none.
   */
  async enqueueMany<const T extends readonly unknown[]>(jobs: JobSpecs<T>, options: { manager?: TransactionClient } = {}): Promise<string[]> {
    const owner = this.routing.elsewhereMany('enqueueMany', queuesOf(jobs));
    if (owner) return owner.enqueueMany(jobs, options);
    const rows = await batchRows(jobs as unknown as readonly AnyJobSpec[], 'enqueueMany', (spec) => this.toRow(spec));
    if (rows.length === 0) return [];
    let tx = this.joined(options.manager, 'enqueueMany', rows[0].queue);
    if (tx instanceof Promise) tx = await tx;
    if (rows.some((r) => r.uniqueKey != null)) {
      return (await woken(this.wakes, tx, rows, (wake) => traceEnqueue(() => batchCall('enqueueMany', rows), (trace) => this.store.insertKeyedJobs(rows, tx, trace, wake)), keyed)).map((r) => r.id);
    }
    return woken(this.wakes, tx, rows, (wake) => traceEnqueue(() => batchCall('enqueueMany', rows), (trace) => this.store.insertJobs(rows, tx, trace, wake)));
  }

  /**
   * enqueueMany with each job's outcome, in order: for jobs with a `uniqueKey`, whether it was a duplicate
   * (of a job in the database, or of an earlier job of the same call). One statement, as enqueueMany.
   */
  async enqueueManyUnique<const T extends readonly unknown[]>(jobs: JobSpecs<T>, options: { manager?: TransactionClient } = {}): Promise<EnqueueResult[]> {
    const owner = this.routing.elsewhereMany('enqueueManyUnique', queuesOf(jobs));
    if (owner) return owner.enqueueManyUnique(jobs, options);
    const rows = await batchRows(jobs as unknown as readonly AnyJobSpec[], 'enqueueManyUnique', (spec) => this.toRow(spec));
    if (rows.length === 0) return [];
    const tx = await this.joined(options.manager, 'enqueueManyUnique', rows[0].queue);
    return (await woken(this.wakes, tx, rows, (wake) => traceEnqueue(() => batchCall('enqueueManyUnique', rows), (trace) => this.store.insertKeyedJobs(rows, tx, trace, wake)), keyed)).map(toResult);
  }


  /**
   * The client an enqueue joins: its `manager`, else the surrounding @Transactional() call's (option
   * ambientTransactions), else none (undefined: the enqueue autocommits on the queue's own pool).
   */
  protected clientOf(manager: TransactionClient | undefined): TransactionClient | undefined {
    return manager ?? this.ambient?.current();
  }

  /** The caller's transaction an enqueue joins (clientOf), checked to be on this database (ServiceRouting.joined). */
  private joined(manager: TransactionClient | undefined, method: string, queue: string): CallerTransaction | undefined | Promise<CallerTransaction | undefined> {
    return this.routing.joined(this.clientOf(manager), method, queue);
  }

  /**
   * Adds a flow: jobs that depend on jobs (any DAG), every job and edge in one statement, in the caller's transaction
   * with `manager` as for enqueue. A job with dependsOn waits, `blocked`, until its parents are done. Everything is
   * checked first (refs, cycles, options, typed payloads), and a refused flow stores nothing. Returns the flow's id
   * and each job's id by ref (docs/guides/flows.md).
   */
  async enqueueFlow<const T extends readonly unknown[]>(
    typedSpec: { name?: string; jobs: FlowJobSpecs<T> },
    options: { manager?: TransactionClient } = {},
  ): Promise<EnqueuedFlow> {
    const spec = typedSpec as unknown as FlowSpec;
    if (spec === null || typeof spec !== 'object') throw new PgQueueError('enqueueFlow expects { name?, jobs: [{ ref, queue, payload, dependsOn? }] }.');
    const owner = this.routing.elsewhereMany('enqueueFlow', Array.isArray(spec.jobs) ? spec.jobs.map((job) => job?.queue) : []);
    if (owner) return owner.enqueueFlow(spec, options);
    const name = checkFlowName('enqueueFlow', spec.name);
    const plan = await this.flowKit.plan('enqueueFlow', spec.jobs);
    const tx = await this.joined(options.manager, 'enqueueFlow', plan.rows[0]?.queue ?? '');
    // One producer span for the call, whose context every job of the flow carries: the flow is one trace. Woken as
    // enqueueMany is (a deferred NOTIFY without a manager), for the queues of the jobs that can run now.
    const runnable = plan.rows.filter((row) => !row.blocked);
    const { flowId, ids } = await woken(this.wakes, tx, runnable, (wake) => traceEnqueue(batchCall('enqueueFlow', plan.rows), (trace) => this.store.flows.insertFlow(name, plan, tx, trace, wake)));
    return { id: flowId, jobs: Object.fromEntries(plan.rows.map((row, i) => [row.ref, ids[i]])) };
  }

  /**
   * The processes that run workers, as each registered itself (README: "Instances"): id (its workerId, the
   * `lockedBy` of its jobs), host, pid, queues with their concurrency and running jobs, started, last seen, and
   * whether it is live (it wrote its row within leaseMs + heartbeatMs). Live ones first; at most 500.
   */
  async instances(): Promise<InstanceRecord[]> {
    return this.store.instances.list();
  }

  /**
   * Why job `id` is not running, in words: every gate that holds it now (README: "Why a job is not running"): due
   * later (a delay, a retry's backoff, a snooze), its queue paused, no live instance serving its queue, the queue at
   * its globalConcurrency (how many run, where), its concurrency key busy (which jobs), the rate window full (until
   * when), its flow's parents not done, read ahead by an instance; or 'ready' with how many due jobs are ahead of it.
   * A running or finished job says so. Null when there is no such job. Two or three reads, all bounded.
   */
  async whyNotRunning(id: string | number | bigint): Promise<WaitExplanation | null> {
    return explainWait(this.store.waits, this.store.instances, jobId(id, 'job'));
  }

  /** A flow with every job (its status, result, and for a blocked job the parents it waits for) and edge; null when there is none. */
  async getFlow(id: string | number | bigint): Promise<FlowRecord | null> {
    return this.store.flows.getFlow(jobId(id, 'flow'));
  }

  /**
   * Cancels a flow that has not finished: its queued and blocked jobs never run, its running ones have their signal
   * aborted and their outcome discarded (as cancel() does); no compensation runs. False when there is no such flow
   * or it had finished.
   */
  async cancelFlow(id: string | number | bigint): Promise<boolean> {
    return (await this.store.flows.cancelFlow(jobId(id, 'flow'))) !== null;
  }

  /**
   * Waits until the flow finishes and resolves with its record: completed, failed, compensated,
   * compensation_failed or cancelled (a flow that did not complete resolves too: its status says how it ended).
   * Wakes at the flow's finish notice (on this instance's LISTEN connection, as waitFor does), and reads the flow's
   * row between notices too (every 25 ms at first, backing off to 1 s: a notice can be missed). Rejects with
   * JobWaitTimeoutError after `timeoutMs`, with the signal's reason when it aborts, with a PgQueueError when there is
   * no such flow.
   */
  async waitForFlow(id: string | number | bigint, options: WaitOptions = {}): Promise<FlowRecord> {
    const text = jobId(id, 'flow');
    return waitForFlow(this.store.flows, this.waiters, text, checkWaitOptions(`waitForFlow(${text})`, options));
  }

  /** Flows, newest first (at most `limit`, 100 by default), optionally of one status. */
  async flows(options: { status?: FlowStatus; limit?: number } = {}): Promise<FlowSummary[]> {
    return this.store.flows.listFlows(options.status ?? null, options.limit ?? 100);
  }

  /** The job's row: status, attempts, last error, and its `result` and `progress` (README: Results, Progress). */
  async get<TPayload = unknown, TResult = unknown>(id: string | number | bigint): Promise<JobRecord<TPayload, TResult> | null> {
    return (await this.store.getJob(jobId(id))) as JobRecord<TPayload, TResult> | null;
  }

  /**
   * Waits until the job finishes, whichever process runs it, and resolves with its result (null when the
   * handler returned nothing). Rejects with JobFailedError (its `lastError`, `status`) when the job is
   * dead-lettered or cancelled; JobWaitTimeoutError after `timeoutMs`; the signal's reason when `signal`
   * aborts; a PgQueueError when there is no such job. Retries in between keep it waiting. Only jobs someone
   * waits on are notified when they finish (README: Waiting for a job).
   */
  async waitFor<TResult = unknown>(id: string | number | bigint, options: WaitOptions = {}): Promise<TResult | null> {
    const text = jobId(id);
    const checked = checkWaitOptions(`waitFor(${text})`, options);
    if (!this.waiters) throw new PgQueueError(`waitFor(${text}) needs the QueueService of a PgQueueModule app.`);
    return (await this.waiters.wait(text, checked)) as TResult | null;
  }

  /**
   * Cancels a queued or running job: a queued job never runs; a running one has its signal aborted and its
   * outcome discarded. Returns 'cancelled', or the status that made it impossible, or 'not-found'.
   */
  async cancel(id: string | number | bigint): Promise<CancelResult> {
    return this.store.cancelJob(jobId(id));
  }

  /**
   * Puts a failed (dead-lettered) or cancelled job back in the queue with a fresh set of attempts. The steps it
   * recorded (job.step) are kept, so it resumes after them; `resetSteps: true` forgets them, to run every step again.
   * A job of a flow runs only after its parents completed: one whose parent has not completed (it failed or was
   * cancelled because of that parent) or no longer exists is refused with a PgQueueError naming the parent; retry the
   * parent, and the job comes back with it (docs/guides/flows.md, "Cancel, retry").
   */
  async retry(id: string | number | bigint, options: { resetSteps?: boolean } = {}): Promise<boolean> {
    const resetSteps = options?.resetSteps ?? false;
    if (typeof resetSteps !== 'boolean') throw new PgQueueError(`retry(${String(id)}): resetSteps must be true or false; got ${typeof resetSteps}.`);
    return this.store.retryJob(jobId(id), resetSteps);
  }

  /** Makes a job that waits for its run_at due now (a job already due keeps its place). See `ChangeResult`. */
  async promote(id: string | number | bigint): Promise<ChangeResult> {
    return this.store.changeJob(jobId(id), { promote: true });
  }

  /** Gives a job that has not started another priority (higher runs first). See `ChangeResult`. */
  async changePriority(id: string | number | bigint, priority: number): Promise<ChangeResult> {
    checkPriority(`changePriority(${String(id)})`, priority ?? null);
    return this.store.changeJob(jobId(id), { priority });
  }

  /** Moves a job that has not started to `runAt` (a time past runs it now). See `ChangeResult`. */
  async changeRunAt(id: string | number | bigint, runAt: Date): Promise<ChangeResult> {
    checkRunAt(`changeRunAt(${String(id)})`, runAt ?? null);
    return this.store.changeJob(jobId(id), { runAt });
  }

  /** Moves a job that has not started to `delayMs` from now (the database's clock). See `ChangeResult`. */
  async changeDelay(id: string | number | bigint, delayMs: number): Promise<ChangeResult> {
    checkDelayMs(`changeDelay(${String(id)})`, delayMs ?? null);
    return this.store.changeJob(jobId(id), { delayMs });
  }

  /**
   * Replaces the payload of a job that has not started, checked as at enqueue (JSON, size, and the validator of its
   * queue's `defineQueue`). See `ChangeResult`: a job that started runs with the payload it started with.
   */
  async updatePayload(id: string | number | bigint, payload: unknown): Promise<ChangeResult> {
    const text = jobId(id);
    const queue = await this.store.jobQueue(text);
    if (queue === null) return 'not-found';
    await validatePayload(`updatePayload(${text})`, queue, payload);
    return this.store.changeJob(text, { payloadJson: serializePayload(queue, payload, this.options.maxPayloadBytes), queue });
  }

  /**
   * Stops every instance from starting jobs of this queue: no claim takes any, and jobs read ahead into workers'
   * buffers are given back instead of started (this process's at once; other instances' when they hear of it,
   * a NOTIFY away). Running jobs finish; enqueueing still works.
   */
  async pause(queue: string): Promise<void> {
    return this.owning(queue)?.pause(queue) ?? this.settings.pause(queue);
  }

  /** Lets the queue run again; idle workers wake at once. */
  async resume(queue: string): Promise<void> {
    return this.owning(queue)?.resume(queue) ?? this.settings.resume(queue);
  }

  /**
   * Stores fair share weights of the queue's keys (null: back to the `fairness` option's weight), read by the next
   * claim in every process (README: "Fair share across keys").
   */
  async setFairnessWeights(queue: string, weights: Record<string, number | null>): Promise<void> {
    return this.owning(queue)?.setFairnessWeights(queue, weights) ?? this.settings.setFairnessWeights(queue, weights);
  }

  /** The fair share weights stored for the queue at runtime, by key. */
  async fairnessWeights(queue: string): Promise<Record<string, number>> {
    return this.owning(queue)?.fairnessWeights(queue) ?? this.settings.fairnessWeights(queue);
  }

  /**
   * Changes the queue's limits at runtime, in every process serving it within a second (README, "Limits changed at
   * runtime"): a key left out keeps what is stored, `null` gives back the decorator's value, `'none'` removes that
   * limit. Checked before anything is stored (a PgQueueError names the problem). Lowering a limit aborts no running
   * job: fewer start. Returns the limits in force after the change.
   */
  async setQueueLimits(queue: string, change: QueueLimitsChange): Promise<QueueLimits> {
    return this.owning(queue)?.setQueueLimits(queue, change) ?? this.settings.setQueueLimits(queue, change);
  }

  /** The queue's limits in force, each with where it comes from (the database's override or the decorator's), and its blocks. */
  async getQueueLimits(queue: string): Promise<QueueLimits> {
    return this.owning(queue)?.getQueueLimits(queue) ?? this.settings.queueLimits(queue);
  }

  /** Recorded job state changes, commit-safe and resumable after an id (README: "Event stream"; events/event-stream.ts). */
  events(options: EventStreamOptions = {}): AsyncGenerator<QueueEvent, void, undefined> {
    return openEventStream(this.store.events, options, this.waiters?.listenerConfig);
  }

  /** The queue starts (or, `false`, stops) recording events, for every process; returns the recording queues. */
  async recordEvents(queue: string, on = true): Promise<string[]> {
    assertQueueName(queue);
    return (this.routing.elsewhere(queue) ?? this).store.events.record(queue, on);
  }

  async pausedQueues(): Promise<string[]> {
    return this.store.pausedQueues();
  }

  /** Counts by queue and status. */
  async stats(): Promise<QueueStats> {
    return this.store.countByStatus();
  }

  /**
   * Creates or updates a recurring schedule (by name) that fires jobs into `queue`, handled by that queue's
   * @JobHandler. A changed cron or time zone starts from its next fire after now; any other change keeps the
   * next fire. A schedule declared in code with that name is taken over until the next boot re-declares it.
   */
  async upsertSchedule(spec: ScheduleSpec): Promise<ScheduleInfo> {
    checkScheduleSpec(spec);
    const definition = resolveSchedule(`upsertSchedule(${JSON.stringify(spec.name)})`, spec, this.options.maxPayloadBytes);
    const owner = this.routing.elsewhere(definition.queue);
    return owner ? owner.upsertSchedule(spec) : this.scheduleCalls.upsert(definition);
  }

  /** Deletes a schedule; its jobs already enqueued stay. A schedule declared in code comes back at the next boot (pause it instead). */
  async removeSchedule(name: string): Promise<boolean> {
    return this.scheduleStore.deleteSchedule(scheduleName(name));
  }

  /** Stops a schedule from firing on every instance until resumed; fires during the pause never run. False if no such schedule. */
  async pauseSchedule(name: string): Promise<boolean> {
    return this.scheduleStore.pauseSchedule(scheduleName(name));
  }

  /** Resumes a paused schedule from its next fire after now. False if no such schedule. */
  async resumeSchedule(name: string): Promise<boolean> {
    return this.scheduleCalls.resume(name);
  }

  /**
   * Enqueues one fire of a schedule now, the job a tick would insert (payload with `_schedule`, its priority and
   * attempts, fire time by the database clock); the schedule's own next fire does not move. Null if no such schedule.
   */
  async fireSchedule(name: string): Promise<string | null> {
    return this.scheduler.fireNow(scheduleName(name));
  }

  /** Every schedule, with its next and last fire time (code and runtime ones, paused and orphaned ones too). */
  async schedules(): Promise<ScheduleInfo[]> {
    return this.scheduleStore.listSchedules(this.options.recurring.orphanAfterMs);
  }

  async schedule(name: string): Promise<ScheduleInfo | null> {
    return this.scheduleCalls.get(name);
  }

  private toRow(spec: AnyJobSpec): NewJobRow {
    return buildJobRow(spec, this.options.maxPayloadBytes, this.jobDefaults);
  }
}
