import { AsyncResource } from 'node:async_hooks';
import { flowAccess } from '../flows/flow-access.js';
import type { JobHandlerRegistry, RegisteredHandler } from '../discovery/job-handler.registry.js';
import { JobSnoozedError, JobTimeoutError, RateLimitedError } from '../errors/pg-queue.error.js';
import type { JobRecord, JobStatus } from '../interfaces/job.interface.js';
import type { RecurringScheduler } from '../recurring/recurring-scheduler.js';
import type { JobStore } from '../store/job.store.js';
import type { ClaimedJob } from '../store/job-store.types.js';
import type { TestKitStore } from '../store/test-kit.store.js';
import { retryDelay, snoozeDelay } from '../utils/backoff.js';
import { PayloadRefusedAtStartError } from '../typed/payload-check-at-start.js';
import { errorText, isInstanceOf } from '../utils/error-text.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import { JobAttempt, type JobServices } from '../worker/job-attempt.js';
import { ResultRefusedError, storedResult } from '../worker/stored-result.js';
import { transactionalHandle, type CommittedCompletion } from '../worker/transactional-attempt.js';
import type { DataSource } from 'typeorm';
import { closeness, jestDiff, matchesPartial, show } from './match-payload.js';
import { BAD_DRAIN_OPTION, DRAIN_LIMIT, NO_HANDLER_FOR, NO_SCHEDULE } from './testing.messages.js';

/** How one attempt that the kit ran ended, as the row now says. */
export type DrainOutcome =
  /** The handler returned; the job is completed (or deleted, with completedRetentionMs 0). */
  | 'completed'
  /** The handler threw and attempts are left: the job is queued again, `retryInMs` from now. */
  | 'retried'
  /** The handler threw on its last attempt: the job is dead-lettered (status failed). */
  | 'failed'
  /** The handler threw JobSnoozedError (or RateLimitedError): queued again `snoozeMs` from now, the attempt not counted. */
  | 'snoozed'
  /** The row was no longer this claim's when the outcome was written (cancelled while running): nothing written. */
  | 'discarded';

export interface DrainedJob<TPayload = unknown> {
  id: string;
  queue: string;
  payload: TPayload;
  /** Which attempt this was (1 for the first run). */
  attempt: number;
  outcome: DrainOutcome;
  /** What the handler threw (retried, failed, snoozed; a JobTimeoutError when it ran past timeoutMs). */
  error?: unknown;
  /** retried: the delay the queue's backoff chose. */
  retryInMs?: number;
  /** snoozed: the delay the handler asked for. */
  snoozeMs?: number;
}

export interface DrainOptions {
  /** Only this queue (or these). Default: every queue a @JobHandler of the app handles. */
  queue?: string | string[];
  /**
   * Move the queue's clock this many ms forward first: queued jobs due within that time (delayed jobs,
   * retries, snoozes) become due now, later ones come that much closer. Rows are shifted in the database,
   * whose clock the queue runs on; Date in the app is not touched.
   */
  advanceBy?: number;
  /**
   * Also run every job scheduled for later, and keep doing so for the retries and snoozes the drain itself
   * causes, until no job of the queues is queued: a failing job then runs all its attempts and ends dead-lettered.
   */
  includeScheduled?: boolean;
  /** Stop with an error after this many attempts (a handler that keeps re-enqueueing itself). Default 1_000. */
  maxJobs?: number;
}

export interface ExpectEnqueuedOptions {
  /** Only jobs in this status (or these). Default: any status, so a job already run still counts as enqueued. */
  status?: JobStatus | JobStatus[];
}

/** Thrown by expectEnqueued / expectNotEnqueued: says what was looked for and lists what the queue holds. */
export class QueueAssertionError extends Error {
  override name = 'QueueAssertionError';
}

/**
 * What a test drives the queue with: runs due jobs through the app's real @JobHandler methods (discovered by
 * the module), with the queue's real claim and settle statements, so fencing, retries, backoff, dead letters
 * and snoozes behave as in production; moves the queue's clock; asserts on what was enqueued.
 * Get it with getQueueTestKit(app).
 */
export class QueueTestKit {
  /** Attempts running right now (inline runs the app did not await); app.close() waits for them. */
  private readonly inFlight = new Set<Promise<unknown>>();

  /** @internal Built by the testing WorkerPool. */
  constructor(
    private readonly registry: JobHandlerRegistry,
    private readonly store: JobStore,
    private readonly kitStore: TestKitStore,
    private readonly options: ResolvedModuleOptions,
    /** 'inline': enqueues run their jobs at once (see overrideQueueForTesting). */
    readonly mode: 'manual' | 'inline',
    private readonly scheduler: RecurringScheduler,
    /** The app's DataSource, for transactional handlers (undefined: the module has none). */
    private readonly appDataSource?: DataSource,
  ) {
    this.services = {
      flows: flowAccess(store.flows, options, registry),
      steps: { store: store.steps, workerId: options.workerId, maxResultBytes: options.maxResultBytes },
      logs: options.jobLogs,
    };
  }

  private readonly services: JobServices;
  /**
   * The async context the kit's handlers run in, as a worker's (RunningJobs.scope): made with the kit, so that a job
   * run inline by an enqueue inside a request (a CLS store, a `@nestjs-cls/transactional` transaction) does not see it.
   */
  private readonly scope = new AsyncResource('PgQueueTestKit');

  /**
   * Runs the due jobs of the queues (all handled queues by default), one at a time, until none is due, and
   * returns every attempt in the order it ran. Jobs a handler enqueues meanwhile run too, if due.
   */
  async drain(options: DrainOptions = {}): Promise<DrainedJob[]> {
    const { advanceBy, includeScheduled = false, maxJobs = 1_000 } = options;
    const handlers = this.handlersOf(options.queue);
    const queues = handlers.map((h) => h.queue);
    if (advanceBy !== undefined) {
      if (!Number.isInteger(advanceBy) || advanceBy < 0) throw new RangeError(BAD_DRAIN_OPTION('advanceBy', advanceBy, 'a non-negative integer of ms'));
      await this.kitStore.advanceQueuedJobs(queues, advanceBy);
    }
    if (!Number.isInteger(maxJobs) || maxJobs < 1) throw new RangeError(BAD_DRAIN_OPTION('maxJobs', maxJobs, 'a positive integer'));
    const ran: DrainedJob[] = [];
    for (;;) {
      if (includeScheduled) await this.kitStore.makeQueuedJobsDue(queues);
      let claimedAny = false;
      // One job (a batch handler: one call) per queue per pass: queues take turns, as they would with workers side by side.
      for (const handler of handlers) {
        const jobs = await this.claim(handler, Math.min(handler.options.batch?.size ?? 1, Math.max(1, maxJobs - ran.length)));
        if (jobs.length === 0) continue;
        if (ran.length >= maxJobs) {
          // Put back, not run: the rows stay as they were for the test to look at.
          await this.store.releaseJobs(this.options.workerId, jobs.map((job) => ({ id: job.id, token: job.token })));
          throw new Error(DRAIN_LIMIT(maxJobs, queues));
        }
        claimedAny = true;
        ran.push(...(await this.track(handler.handleBatch ? this.runCall(handler, jobs) : this.runAttempt(handler, jobs[0]).then((one) => [one]))));
      }
      if (!claimedAny) return ran;
    }
  }

  /** Makes every queued job of the queues (default: all) due now; returns how many moved. */
  async makeDue(queue?: string | string[]): Promise<number> {
    return this.kitStore.makeQueuedJobsDue(queue === undefined ? null : [queue].flat());
  }

  /** Moves the queue's clock `ms` forward for queued jobs (see DrainOptions.advanceBy); returns how many moved. */
  async advanceBy(ms: number, queue?: string | string[]): Promise<number> {
    if (!Number.isInteger(ms) || ms < 0) throw new RangeError(BAD_DRAIN_OPTION('advanceBy', ms, 'a non-negative integer of ms'));
    return this.kitStore.advanceQueuedJobs(queue === undefined ? null : [queue].flat(), ms);
  }

  /**
   * Fires a recurring schedule (@RecurringJob or upsertSchedule) now: enqueues the job its tick would, with
   * `_schedule` in the payload, and returns its id; `drain()` then runs it. In a test, schedules never fire by
   * themselves, so a drain's result does not depend on when a minute turns.
   */
  async fireSchedule(name: string): Promise<string> {
    const id = await this.scheduler.fireNow(name);
    if (id !== null) return id;
    const known = (await this.kitStore.scheduleNames()).map((n) => `"${n}"`).join(', ');
    throw new Error(NO_SCHEDULE(name, known));
  }

  /** The jobs of a queue (default: all queues) as the table holds them, oldest first. */
  async jobs<TPayload = unknown>(queue?: string | string[]): Promise<JobRecord<TPayload>[]> {
    return (await this.kitStore.listJobs(queue === undefined ? null : [queue].flat())) as JobRecord<TPayload>[];
  }

  /** Deletes every job (with uniqueForMs windows and paused flags): a clean queue for the next test. */
  async clear(): Promise<number> {
    return this.kitStore.deleteAllJobs();
  }

  /**
   * Passes when a job of `queue` holds `payload` (a partial match: objects may hold more keys; Jest's
   * asymmetric matchers work) and returns the first such job; otherwise throws a QueueAssertionError listing
   * the queue's jobs, with Jest's diff against the closest one when the test runs under Jest.
   */
  async expectEnqueued<TPayload = unknown>(queue: string, payload?: unknown, options: ExpectEnqueuedOptions = {}): Promise<JobRecord<TPayload>> {
    const { jobs, candidates, wanted } = await this.lookFor(queue, payload, options);
    const found = candidates.find((j) => payload === undefined || matchesPartial(j.payload, payload));
    if (found) return found as JobRecord<TPayload>;
    let message = `expected a job in queue "${queue}"${wanted}; ${describeJobs(queue, jobs)}`;
    const closest = [...candidates].sort((a, b) => closeness(b.payload, payload) - closeness(a.payload, payload))[0];
    const diff = closest && payload !== undefined ? jestDiff(closest.payload, payload) : undefined;
    if (diff) message += `\n\nclosest, job ${closest.id}:\n${diff}`;
    throw new QueueAssertionError(message);
  }

  /** Passes when no job of `queue` holds `payload` (no job at all, without a payload). */
  async expectNotEnqueued(queue: string, payload?: unknown, options: ExpectEnqueuedOptions = {}): Promise<void> {
    const { jobs, candidates, wanted } = await this.lookFor(queue, payload, options);
    const found = candidates.filter((j) => payload === undefined || matchesPartial(j.payload, payload));
    if (found.length === 0) return;
    throw new QueueAssertionError(`expected no job in queue "${queue}"${wanted}, found ${found.length} (${found.map((j) => j.id).join(', ')}); ${describeJobs(queue, jobs)}`);
  }

  /** @internal Inline mode: runs what is due in these queues now (the jobs just enqueued among them). */
  async runInline(queues: string[]): Promise<void> {
    const handled = [...new Set(queues)].filter((q) => this.registry.get(q));
    if (handled.length > 0) await this.drain({ queue: handled });
  }

  /** @internal Resolves once no attempt the kit started is running (app.close() waits on it). */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private async lookFor(queue: string, payload: unknown, { status }: ExpectEnqueuedOptions) {
    const statuses = status === undefined ? undefined : [status].flat();
    const jobs = await this.kitStore.listJobs([queue]);
    const candidates = statuses ? jobs.filter((j) => statuses.includes(j.status)) : jobs;
    const wanted = `${payload === undefined ? '' : ` with payload matching ${show(payload)}`}${statuses ? ` in status ${statuses.join(' or ')}` : ''}`;
    return { jobs, candidates, wanted };
  }

  private handlersOf(queue: string | string[] | undefined): RegisteredHandler[] {
    if (queue === undefined) return this.registry.all();
    return [queue].flat().map((q) => {
      const handler = this.registry.get(q);
      if (!handler) throw new Error(NO_HANDLER_FOR(q, this.registry.all().map((h) => h.queue)));
      return handler;
    });
  }

  private async claim(handler: RegisteredHandler, n: number): Promise<ClaimedJob[]> {
    // In the workers' order (ClaimOrder): newest first for a LIFO handler, else LIFO jobs first (the kit does not read
    // the queue's row for it: 'mixed' is the FIFO order when the queue has no LIFO job). The stored limits are read
    // first, as a worker's keeper reads them: a claim takes nothing unless it sends the row's own (queueStopped).
    const [settings] = await this.store.queueSettings([handler.queue]);
    const stored = settings?.limitsText ?? null;
    return (await this.store.claimJobs(handler.queue, n, this.options.workerId, this.options.leaseMs, false, undefined, false, handler.options.lifo ? 'lifo' : 'mixed', stored)).jobs;
  }

  private track<T>(attempt: Promise<T>): Promise<T> {
    this.inFlight.add(attempt);
    void attempt.finally(() => this.inFlight.delete(attempt)).catch(() => undefined);
    return attempt;
  }

  /**
   * One call of a batch handler with the jobs claimed for it, each job then settled on its own as the worker settles
   * it: its own outcome (job.complete, fail, snooze) or the call's.
   */
  private async runCall(handler: RegisteredHandler, jobs: ClaimedJob[]): Promise<DrainedJob[]> {
    const attempts = jobs.map((job) => new JobAttempt(handler.queue, job, this.services));
    for (const attempt of attempts) attempt.inBatch = true;
    const ran = await runHandler(() => this.scope.runInAsyncScope(handler.handleBatch!, undefined, attempts), handler.options.timeoutMs, (error) => attempts.forEach((a) => a.abort(error)));
    const settled: DrainedJob[] = [];
    for (const [i, job] of jobs.entries()) settled.push(await this.settle(handler, job, attempts[i], ran, undefined));
    return settled;
  }

  /** One attempt, settled as the worker settles it: the same statements, the same backoff and snooze rules. */
  private async runAttempt(handler: RegisteredHandler, job: ClaimedJob): Promise<DrainedJob> {
    const attempt = new JobAttempt(handler.queue, job, this.services);
    // A transactional handler runs in a transaction of the app's DataSource, which commits its completion (as the worker runs it).
    let committed: CommittedCompletion | undefined;
    const inTransaction = handler.options.transactional && this.appDataSource;
    const handle = inTransaction
      ? transactionalHandle(
          handler.handle,
          { dataSource: inTransaction, store: this.store, workerId: this.options.workerId, maxResultBytes: this.options.maxResultBytes, deleteCompleted: this.options.maintenance.completedRetentionMs === 0 },
          (_attempt, done) => (committed = done),
        )
      : handler.handle;
    const ran = await runHandler(() => this.scope.runInAsyncScope(handle, undefined, attempt), handler.options.timeoutMs, (error) => attempt.abort(error));
    return this.settle(handler, job, attempt, ran, committed);
  }

  /** Writes an attempt's outcome: its own (a batch job's complete, fail, snooze), else what its handler or call did. */
  private async settle(handler: RegisteredHandler, job: ClaimedJob, attempt: JobAttempt, ran: { error?: unknown; result?: unknown }, committed: CommittedCompletion | undefined): Promise<DrainedJob> {
    let error = attempt.mark ? attempt.mark.error : ran.error;
    const result = attempt.mark ? attempt.mark.result : attempt.inBatch ? undefined : ran.result;
    let resultJson: string | undefined;
    // As the worker decides (worker/attempt-outcome.ts): a refused payload would be refused again on every retry.
    // A step's result the queue cannot store fails the job for good, as the handler's own result would.
    const refusedAtStart = isInstanceOf(error, PayloadRefusedAtStartError) || isInstanceOf(error, ResultRefusedError);
    let final = refusedAtStart;
    if (error === undefined && result != null) {
      const stored = storedResult(handler.queue, job.id, result, this.options.maxResultBytes);
      if ('refused' in stored) [error, final] = [stored.refused, true];
      else resultJson = stored.json;
    }
    const drainedAs = { id: job.id, queue: handler.queue, payload: job.payload, attempt: job.attempt };
    if (error === undefined && committed) {
      if (committed.flowJobs) await this.store.flows.recheckFlowJobs(committed.flowJobs);
      return { ...drainedAs, outcome: 'completed' };
    }
    const progressJson = attempt.progressJson;
    // The lines the handler logged (job.log()), written with the outcome as the worker writes them.
    const logEntry = attempt.logEntry;
    const { workerId } = this.options;
    const ref = { id: job.id, token: job.token };
    const drained = drainedAs;
    if (error instanceof JobSnoozedError || error instanceof RateLimitedError) {
      // A partner's 429 is a snooze of the job here (the kit runs one process: the queue's block is not modelled).
      const { delayMs } = snoozeDelay(error.delayMs);
      const note = error instanceof RateLimitedError ? { note: `rate limited by the partner for ${delayMs} ms` } : {};
      const snoozed = await this.store.snoozeJobs(workerId, [{ ...ref, delayMs, logEntry, ...note }]);
      return { ...drained, outcome: snoozed.has(job.id) ? 'snoozed' : 'discarded', error, snoozeMs: delayMs };
    }
    if (error !== undefined) {
      const retryDelayMs = !final && job.attempt < job.maxAttempts ? retryDelay(handler.options.backoff, job.attempt, error, handler.queue).delayMs : 0;
      const statuses = await this.store.settleFailures(workerId, [{ ...ref, error: errorText(refusedAtStart ? (error as Error).message : error), retryDelayMs, final, progressJson, logEntry }]);
      const status = statuses.answer.get(job.id);
      if (statuses.flowJobs) await this.store.flows.recheckFlowJobs(statuses.flowJobs);
      if (status === 'queued') return { ...drained, outcome: 'retried', error, retryInMs: retryDelayMs };
      return { ...drained, outcome: status === 'failed' ? 'failed' : 'discarded', error };
    }
    if (attempt.spawned) {
      // As the worker writes it (worker/outcome-writer.ts): the children only with the completion.
      const { completed } = await this.store.flows.completeSpawning(workerId, { ...ref, resultJson, progressJson, logEntry }, attempt.spawned);
      if (completed) await this.store.flows.recheckFlowJobs([job.id]);
      return { ...drained, outcome: completed ? 'completed' : 'discarded' };
    }
    const refused = await this.store.settleCompletions(workerId, [{ ...ref, resultJson, progressJson, logEntry }], this.options.maintenance.completedRetentionMs === 0);
    if (refused.flowJobs) await this.store.flows.recheckFlowJobs(refused.flowJobs);
    return { ...drained, outcome: refused.answer.has(job.id) ? 'discarded' : 'completed' };
  }
}

/**
 * Runs a handler's call; resolves with what it threw (undefined when it returned) or returned, a JobTimeoutError past
 * timeoutMs (`abort` then aborts the signals of the call's jobs).
 */
async function runHandler(call: () => unknown, timeoutMs: number | undefined, abort: (error: Error) => void): Promise<{ error?: unknown; result?: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const run = (async () => call())();
    if (timeoutMs === undefined) return { result: await run };
    else {
      const timedOut = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const error = new JobTimeoutError(timeoutMs);
          abort(error);
          reject(error);
        }, timeoutMs);
      });
      return { result: await Promise.race([run, timedOut]) };
    }
  } catch (error) {
    return { error: error ?? new Error(`handler threw ${String(error)}`) };
  } finally {
    clearTimeout(timer);
  }
}

function describeJobs(queue: string, jobs: JobRecord[]): string {
  if (jobs.length === 0) return `queue "${queue}" holds no job.`;
  const lines = jobs.slice(0, 20).map((j) => `  job ${j.id} (${j.status}, attempt ${j.attempts}/${j.maxAttempts}): ${show(j.payload)}`);
  if (jobs.length > 20) lines.push(`  ... and ${jobs.length - 20} more`);
  return `queue "${queue}" holds ${jobs.length} job(s):\n${lines.join('\n')}`;
}
