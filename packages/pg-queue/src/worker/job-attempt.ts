import { inspect } from 'node:util';
import type { EntityManager } from 'typeorm';
import { JobAbortedError, JobSnoozedError, PgQueueError } from '../errors/pg-queue.error.js';
import type { Job } from '../interfaces/job.interface.js';
import type { Jsonified } from '../interfaces/jsonified.js';
import type { FlowAccess } from '../flows/flow-access.js';
import type { CompensatedJob, FlowJobSpec, ParentJob } from '../flows/flow.interfaces.js';
import type { FlowPlan } from '../flows/plan-flow.js';
import type { QueueDefinition } from '../typed/queue-definition.js';
import { MAX_PROGRESS_BYTES } from '../pg-queue.constants.js';
import { PROGRESS_NOT_JSON, PROGRESS_TOO_LARGE } from '../pg-queue.messages.js';
import type { ClaimedJob } from '../store/job.store.js';
import { JobSteps, type StepAccess } from '../steps/job-steps.js';
import type { StoredStep } from '../steps/step.interfaces.js';
import { serializeValue } from '../utils/serialize-payload.js';
import type { LogEntry } from '../store/job-store.types.js';
import { DEFAULT_JOB_LOG_LIMITS, PendingLogs, type JobLogLimits } from './job-logs.js';

/** What a running job reaches the queue through (absent for a job with no database behind it). */
export interface JobServices {
  readonly flows?: FlowAccess;
  readonly steps?: StepAccess;
  /** Steps already recorded, for a job without a store (createTestJob's `steps`). */
  readonly recordedSteps?: readonly StoredStep[];
  /** The module's jobLogs bounds (default DEFAULT_JOB_LOG_LIMITS). */
  readonly logs?: JobLogLimits;
}

/** The parts of an attempt only some handlers use (see JobAttempt.ext). */
interface AttemptExtras {
  steps?: JobSteps;
  manager?: EntityManager;
  inBatch?: boolean;
  settledInTransaction?: boolean;
  mark?: { error: unknown; result?: unknown };
  /** job.log() lines no statement has written yet (made on the first call). */
  logs?: PendingLogs;
}

/**
 * The Job a handler receives, and the worker's handle on that attempt. Its AbortSignal is made on first
 * use: an AbortController with its EventTarget cost 5.4 µs and several allocations per job, 8.8% of the
 * worker's CPU at 15k no-op jobs/s, and most handlers never look at the signal. An attempt aborted before
 * anyone asked still hands out an aborted signal, with the same reason.
 */
export class JobAttempt<TPayload = unknown> implements Job<TPayload> {
  readonly id: string;
  readonly payload: TPayload;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly priority: number;
  private readonly runAtMs: number;
  private readonly createdAtMs: number;
  /** @internal The trace context the job was enqueued under (null: none), for the consumer span (tracing/). */
  readonly traceContext: unknown;
  private dates: { runAt: Date; createdAt: Date } | undefined;
  private controller: AbortController | undefined;
  private abortedWith: { reason: unknown } | undefined;
  /**
   * The last progress given and not written yet (JSON text): the next heartbeat, or the outcome, writes it
   * and clears it. Only the last value of a burst reaches the database.
   */
  progressJson: string | undefined;
  /** Children spawned by the handler (job.spawn), created with the completion. */
  spawned: FlowPlan | undefined;
  private spawnSpecs: FlowJobSpec[] | undefined;
  /** This claim's fence token: the steps' records are fenced by it. */
  readonly token: string;
  /**
   * What only some attempts use (steps, a transaction, a batch call), in one field made on first use: every field of
   * this class is set on every job, and the worker makes one per job (a field each would cost every job).
   */
  private ext: AttemptExtras | undefined;

  constructor(
    readonly queue: string,
    job: ClaimedJob,
    /** Absent where no database stands behind the job (createTestJob): the flow methods then throw, and steps are kept in memory. */
    private readonly services?: JobServices,
  ) {
    this.token = job.token;
    this.id = job.id;
    this.payload = job.payload as TPayload;
    this.attempt = job.attempt;
    this.maxAttempts = job.maxAttempts;
    this.priority = job.priority;
    this.runAtMs = job.runAtMs;
    this.createdAtMs = job.createdAtMs;
    this.traceContext = job.traceContext ?? null;
  }

  get runAt(): Date {
    return this.madeDates().runAt;
  }

  get createdAt(): Date {
    return this.madeDates().createdAt;
  }

  /** Made on first use, like the signal: most handlers never read them. */
  private madeDates(): { runAt: Date; createdAt: Date } {
    return (this.dates ??= { runAt: new Date(this.runAtMs), createdAt: new Date(this.createdAtMs) });
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith.reason);
    }
    return this.controller.signal;
  }

  /**
   * What JSON.stringify(job) and console.log(job) show: the Job's fields as a plain object, since signal and
   * the dates are getters and a worker's bookkeeping (a subclass) is none of the handler's business.
   */
  toJSON(): Omit<Job<TPayload>, 'signal' | 'progress' | 'log' | 'parents' | 'parent' | 'compensating' | 'spawn' | 'step' | 'sleep' | 'manager' | 'complete' | 'fail' | 'snooze'> {
    const { id, queue, payload, attempt, maxAttempts, priority, runAt, createdAt } = this;
    return { id, queue, payload, attempt, maxAttempts, priority, runAt, createdAt };
  }

  [inspect.custom](depth: number, options: object): string {
    return `Job ${inspect(this.toJSON(), { ...options, depth: depth < 0 ? 0 : depth })}`;
  }

  progress(value: unknown): void {
    const json = serializeValue(value, 'the value', MAX_PROGRESS_BYTES);
    if (json.problem !== undefined) throw new PgQueueError(PROGRESS_NOT_JSON(this.id, json.problem));
    if (json.bytes > MAX_PROGRESS_BYTES) throw new PgQueueError(PROGRESS_TOO_LARGE(this.id, json.bytes, MAX_PROGRESS_BYTES));
    this.progressJson = json.text;
  }

  log(line: string): void {
    (this.extras().logs ??= new PendingLogs(this.services?.logs ?? DEFAULT_JOB_LOG_LIMITS)).add(line);
  }

  /**
   * @internal The lines logged and not written yet, as a statement sends them (undefined: none, the common case: a
   * statement of a batch in which no job logged is the one it always was), with the number of the last one.
   */
  pendingLogs(): { entry: LogEntry; upTo: number } | undefined {
    return this.ext?.logs?.entry();
  }

  /** @internal pendingLogs' entry alone: what an outcome (completion, failure, snooze, put-back) writes with it. */
  get logEntry(): LogEntry | undefined {
    return this.ext?.logs?.entry()?.entry;
  }

  /** @internal A heartbeat that carried the lines up to number `upTo` landed. */
  logsWritten(upTo: number): void {
    this.ext?.logs?.written(upTo);
  }

  /** @internal The lines waiting to be written (createTestJob's loggedLines). */
  loggedLines(): string[] {
    return this.ext?.logs?.texts() ?? [];
  }

  async parents(): Promise<ParentJob[]> {
    return this.flowAccess('parents').store.jobParents(this.id);
  }

  async parent<TResult = unknown>(ref: string, _queue?: QueueDefinition<unknown, TResult>): Promise<ParentJob<TResult>> {
    const parents = await this.parents();
    const found = parents.find((p) => p.ref === ref);
    if (!found) throw new PgQueueError(`job ${this.id} (${this.queue}): no parent "${ref}"; its parents: ${parents.map((p) => `"${p.ref}"`).join(', ') || 'none'}.`);
    return found as ParentJob<TResult>;
  }

  async compensating<TPayload = unknown, TResult = unknown>(_queue?: QueueDefinition<TPayload, TResult>): Promise<CompensatedJob<TPayload, TResult> | null> {
    return (await this.flowAccess('compensating').store.compensatedJob(this.id)) as CompensatedJob<TPayload, TResult> | null;
  }

  async spawn(jobs: readonly FlowJobSpec[]): Promise<void> {
    const flows = this.flowAccess('spawn');
    if (!Array.isArray(jobs)) throw new PgQueueError(`job ${this.id} (${this.queue}): spawn expects an array of { ref, queue, payload, dependsOn? }.`);
    if (this.spawnSpecs === undefined && (await flows.store.jobFlow(this.id)) === null) {
      throw new PgQueueError(`job ${this.id} (${this.queue}): spawn adds jobs to the job's flow, and this job belongs to none; enqueue it with enqueueFlow.`);
    }
    // Planned whole each time: refs unique and dependsOn resolved across every call of this attempt.
    const specs = [...(this.spawnSpecs ?? []), ...jobs];
    const plan = await flows.plan('spawn', specs);
    await this.refuseHeldKeys(flows, plan, (this.spawnSpecs ?? []).length);
    // An attempt aborted while this call waited (its timeout, a cancel, a lost lease, the shutdown) records nothing
    // and tells its handler, as a step asked for after an abort does: the handler would otherwise run on as if its
    // children were on their way, beside the retry its timeout scheduled, for an outcome that is discarded.
    this.refuseSpawnIfAborted();
    this.spawned = plan;
    this.spawnSpecs = specs;
  }

  private refuseSpawnIfAborted(): void {
    const reason = this.abortReason();
    if (reason === undefined) return;
    throw reason instanceof Error ? reason : new JobAbortedError(`job ${this.id}: spawn not recorded: the attempt was aborted`);
  }

  /**
   * A spawned job's unique key held by a live job (or by another job of this attempt's spawns) refuses the spawn call,
   * naming the job: nothing of the call is recorded, and the handler may catch the error and go on without it (as
   * enqueueFlow refuses a flow whose key is held). A key taken after this check is not a refusal: the completion
   * treats that child as a duplicate (completeSpawning).
   */
  private async refuseHeldKeys(flows: FlowAccess, plan: FlowPlan, from: number): Promise<void> {
    const keyed = plan.rows.map((row, i) => ({ row, i })).filter(({ row }) => row.uniqueKey != null);
    const seen = new Map<string, string>();
    for (const { row } of keyed) {
      const key = `${row.queue}\u0000${row.uniqueKey}`;
      const other = seen.get(key);
      if (other !== undefined) {
        throw new PgQueueError(`job ${this.id} (${this.queue}): spawn: jobs "${other}" and "${row.ref}" have the same uniqueKey ${JSON.stringify(row.uniqueKey)} (queue "${row.queue}"); nothing of this spawn call was recorded.`);
      }
      seen.set(key, row.ref);
    }
    const fresh = keyed.filter(({ i }) => i >= from);
    const held = await flows.store.spawnKeysHeld(fresh.map(({ row }) => ({ queue: row.queue, uniqueKey: row.uniqueKey! })));
    if (held.length === 0) return;
    const { row } = fresh[held[0].index];
    throw new PgQueueError(
      `job ${this.id} (${this.queue}): spawn: job "${row.ref}" (queue "${row.queue}", uniqueKey ${JSON.stringify(row.uniqueKey)}): job ${held[0].holder} holds the key; nothing of this spawn call was recorded (catch the error to complete without it).`,
    );
  }

  step<T>(name: string, run: () => T | PromiseLike<T>): Promise<Jsonified<T>> {
    this.refuseStepsInTransaction('step', name);
    return this.stepRunner().step(name, run);
  }

  sleep(name: string, ms: number): Promise<void> {
    this.refuseStepsInTransaction('sleep', name);
    return this.stepRunner().sleep(name, ms);
  }

  /** A transactional handler's transaction (worker/transactional-attempt.ts); undefined for any other handler. */
  get manager(): EntityManager | undefined {
    return this.ext?.manager;
  }

  set manager(manager: EntityManager | undefined) {
    this.extras().manager = manager;
  }

  /**
   * @internal A transactional handler's completion landed in its own transaction, which now commits (or fails to):
   * the row lock is this attempt's until then, so a heartbeat that finds the row gone after waiting on that lock saw
   * this completion commit, not a loss (worker/transactional-attempt.ts; issue 39 item 9).
   */
  get settledInTransaction(): boolean {
    return this.ext?.settledInTransaction === true;
  }

  set settledInTransaction(settled: boolean) {
    this.extras().settledInTransaction = settled;
  }

  /** A job of a batch handler's call: set by whoever runs the call, so that complete(), fail() and snooze() may mark it. */
  get inBatch(): boolean {
    return this.ext?.inBatch === true;
  }

  set inBatch(inBatch: boolean) {
    if (inBatch || this.ext) this.extras().inBatch = inBatch;
  }

  /** A batch job's own outcome (error undefined: completed with `result`), which wins over the call's. */
  get mark(): { error: unknown; result?: unknown } | undefined {
    return this.ext?.mark;
  }

  private extras(): AttemptExtras {
    return (this.ext ??= {});
  }

  private get flows(): FlowAccess | undefined {
    return this.services?.flows;
  }

  complete(result?: unknown): void {
    this.refuseOutsideBatch('complete');
    this.extras().mark = { error: undefined, result };
  }

  fail(error: unknown): void {
    this.refuseOutsideBatch('fail');
    this.extras().mark = { error: error ?? new Error(`job.fail() was given ${String(error)}`) };
  }

  snooze(ms: number): void {
    this.refuseOutsideBatch('snooze');
    this.extras().mark = { error: new JobSnoozedError(ms) };
  }

  /** complete(), fail() and snooze() are a batch handler's: a single job's handler returns or throws. */
  private refuseOutsideBatch(method: string): void {
    if (!this.inBatch) throw new PgQueueError(`job ${this.id} (${this.queue}): ${method}() settles one job of a batch handler's call (batch: { size }); a single job's handler returns or throws instead.`);
  }

  /** The attempt's abort reason (timeout, cancel, lost lease, shutdown), or undefined while it may still settle. */
  abortReason(): unknown {
    return this.abortedWith?.reason;
  }

  /**
   * A step's record would outlive a rolled-back transaction (its result kept, its rows gone): in a transactional
   * handler the transaction is the unit that happens once, so steps and sleeps are refused there.
   */
  private refuseStepsInTransaction(kind: string, name: string): void {
    if (this.manager !== undefined) {
      throw new PgQueueError(`job ${this.id} (${this.queue}): ${kind} "${name}" in a transactional handler: its record would outlive a rolled-back transaction; the transaction already makes the handler's database writes happen once.`);
    }
  }

  /** @internal The steps of this attempt (createTestJob reads those kept in memory). */
  stepRunner(): JobSteps {
    return (this.extras().steps ??= new JobSteps(
      { id: this.id, queue: this.queue, token: this.token, attempt: this.attempt, abortReason: () => this.abortReason() },
      this.services?.steps,
      this.services?.recordedSteps,
    ));
  }

  private flowAccess(method: string): FlowAccess {
    if (!this.flows) throw new PgQueueError(`job ${this.id} (${this.queue}): ${method}() needs a job run by the queue (this one has no database behind it).`);
    return this.flows;
  }

  abort(reason: Error): void {
    if (this.abortedWith) return;
    this.abortedWith = { reason };
    this.controller?.abort(reason);
  }
}
