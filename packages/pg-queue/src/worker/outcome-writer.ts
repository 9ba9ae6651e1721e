import type { LoggerService } from '@nestjs/common';
import pg from 'pg';
import type { JobStatus } from '../interfaces/job.interface.js';
import { OUTCOME_UNWRITABLE, SPAWN_DUPLICATES } from '../pg-queue.messages.js';
import type { FinishedFlow } from '../flows/flow.interfaces.js';
import type { FlowPlan } from '../flows/plan-flow.js';
import type { JobRef, JobStore } from '../store/job.store.js';
import type { LogEntry } from '../store/job-store.types.js';
import { errorLine } from '../utils/error-text.js';
import { RetryBackoff, wakeableSleep } from '../utils/retry-backoff.js';
import type { RowLockLane } from './row-lock-lane.js';

/** Writes of one outcome the database may refuse before the writer gives up on it (and its lease lapses). */
export const MAX_OUTCOME_REFUSALS = 3;

/** A finished attempt whose outcome waits to be written (a HeldJob in state `settling`). */
export interface PendingOutcome extends JobRef {
  readonly queue: string;
  /** Set for a failed attempt: what to store (`final`: fail the job for good); undefined for a completion. */
  readonly failure: { error: string; retryDelayMs: number; final?: boolean } | undefined;
  /** A completion's result as JSON text, when the handler returned one to store. */
  readonly resultJson?: string;
  /** The handler's last progress (JSON text) not yet written by a heartbeat: the outcome writes it. */
  readonly progressJson?: string;
  /** The lines the handler logged (job.log()) that no heartbeat wrote: the outcome writes them (read when its statement is built). */
  readonly logEntry?: LogEntry;
  /** Children the handler spawned (job.spawn): created with the completion, in its statement, or not at all. */
  readonly spawned?: FlowPlan;
  /** Set when the handler snoozed (JobSnoozedError): ms until the job runs again; its attempt is not counted. */
  readonly snoozeMs: number | undefined;
  /** Set with snoozeMs for a partner's 429 (RateLimitedError): its last_error note. */
  readonly rateLimited?: { note: string };
  /** Times the database refused this outcome's row (not counting outages). */
  refusals: number;
}

/**
 * What became of each outcome of a batch: the status its row now has (completed, queued for a retry or a
 * snooze, failed), undefined when it was fenced out (no longer this claim's row), 'dropped' when the
 * database refused it MAX_OUTCOME_REFUSALS times (not written; its lease must lapse so the sweeper takes over).
 */
export type WrittenStatus = JobStatus | undefined | 'dropped';

/** Where every outcome's answer goes, one batch at a time: the one route back to the workers. */
export interface OutcomeSink<O extends PendingOutcome> {
  written(batch: readonly O[], statusOf: (outcome: O) => WrittenStatus): void;
  /** A write failed for a reason other than the data (the database unreachable or busy): it will be retried. */
  unreachable(): void;
}

/**
 * Writes job outcomes in batches: completions in one statement, failures in another, each kind in its own
 * loop with its own backoff, so completions never wait on a failure batch the database refuses. A write
 * starts as soon as an outcome arrives and no write of its kind is in flight; outcomes that arrive meanwhile
 * ride the next one. Zero added latency when idle, large batches under load.
 *
 * Two kinds of write error, two answers. The database unreachable (no SQLSTATE, connection and resource
 * errors, deadlocks, timeouts): the batch is kept and retried with backoff; its leases are renewed meanwhile,
 * so nothing is redone unless this process dies. A statement the database refuses (bad data, a constraint, a
 * trigger): the batch is split in halves until the refused rows are found, the others land at once, and an
 * outcome refused MAX_OUTCOME_REFUSALS times is dropped with one log line. How many outcomes may wait is
 * bounded by the workers (QueueWorker.claimWant counts their settling jobs), not here.
 */
export class OutcomeWriter<O extends PendingOutcome = PendingOutcome> {
  private readonly completions: OutcomeQueue<O>;
  private readonly failures: OutcomeQueue<O>;
  private readonly snoozes: OutcomeQueue<O>;
  private readonly flows: FlowRechecker<O>;

  constructor(
    store: JobStore,
    workerId: string,
    logger: LoggerService,
    lane: RowLockLane,
    private readonly sink: OutcomeSink<O>,
    deleteCompleted = false,
    maxBatch = 1_000,
    flowEvents?: FlowEventSink<O>,
  ) {
    const flows = (this.flows = new FlowRechecker<O>(store, logger, flowEvents));
    this.completions = new OutcomeQueue<O>('completion', logger, lane, sink, maxBatch, async (batch) => {
      let spawning: O[] | undefined;
      for (const o of batch) if (o.spawned) (spawning ??= []).push(o);
      const plain = spawning ? batch.filter((o) => !o.spawned) : batch;
      const { answer: refused, flowJobs } = plain.length > 0 ? await store.settleCompletions(workerId, plain, deleteCompleted) : { answer: new Set<string>(), flowJobs: undefined };
      const settled = flowJobs ? jobsOf(batch, flowJobs) : [];
      // A completion that spawns children is a statement of its own (rare): the children exist only if it landed.
      for (const o of spawning ?? []) {
        const spawned = await store.flows.completeSpawning(workerId, o, o.spawned!);
        if (!spawned.completed) {
          refused.add(o.id);
          continue;
        }
        settled.push(o);
        if (spawned.duplicates.length > 0) logger.warn(SPAWN_DUPLICATES(o.id, o.queue, spawned.duplicates));
      }
      flows.recheck(settled);
      return (o) => (refused.has(o.id) ? undefined : 'completed');
    });
    this.failures = new OutcomeQueue<O>('failure', logger, lane, sink, maxBatch, async (batch) => {
      const { answer: statuses, flowJobs } = await store.settleFailures(workerId, batch.map((o) => ({ id: o.id, token: o.token, progressJson: o.progressJson, logEntry: o.logEntry, ...o.failure! })));
      if (flowJobs) flows.recheck(jobsOf(batch, flowJobs));
      return (o) => statuses.get(o.id);
    });
    this.snoozes = new OutcomeQueue<O>('snooze', logger, lane, sink, maxBatch, async (batch) => {
      const snoozed = await store.snoozeJobs(workerId, batch.map((o) => ({ id: o.id, token: o.token, delayMs: o.snoozeMs!, logEntry: o.logEntry, ...(o.rateLimited && { note: o.rateLimited.note }) })));
      return (o) => (snoozed.has(o.id) ? 'queued' : undefined);
    });
  }

  /** Hands in an outcome; `snoozeMs` or `failure` on the outcome says which kind. */
  write(outcome: O): void {
    (outcome.snoozeMs !== undefined ? this.snoozes : outcome.failure ? this.failures : this.completions).push(outcome);
  }

  /**
   * A completion a transactional handler's own transaction wrote and committed (worker/transactional-attempt.ts):
   * nothing to write, but the same answer as a written one (from a later microtask, never re-entering the caller),
   * and the flows' second look when it finished flow jobs.
   */
  committed(outcome: O, flowJobs: readonly string[] | undefined): void {
    if (flowJobs?.length) this.flows.recheck([outcome]);
    queueMicrotask(() => this.sink.written([outcome], () => 'completed'));
  }

  /** Resolves when every outcome handed in so far is written, fenced or dropped. */
  async drain(): Promise<void> {
    await Promise.all([this.completions.drain(), this.failures.drain(), this.snoozes.drain()]);
  }

  /**
   * Shutdown, past the drain deadline: stop retrying. Outcomes still unwritten are dropped; their leases
   * expire and the sweeper runs those jobs again. Without this, a writer whose pool was closed under it kept
   * the process alive, retrying forever.
   */
  close(): void {
    this.completions.close();
    this.failures.close();
    this.snoozes.close();
  }
}

type WriteBatch<O> = (batch: O[]) => Promise<(o: O) => JobStatus | undefined>;

/** One kind of outcome: its queue, its write loop, its backoff. */
class OutcomeQueue<O extends PendingOutcome> {
  private pending: O[] = [];
  private flushing: Promise<void> | undefined;
  private readonly backoff: RetryBackoff;
  private closed = false;
  private wakeFromBackoff: (() => void) | undefined;

  constructor(
    private readonly kind: 'completion' | 'failure' | 'snooze',
    private readonly logger: LoggerService,
    private readonly lane: RowLockLane,
    private readonly sink: OutcomeSink<O>,
    private readonly maxBatch: number,
    private readonly writeBatch: WriteBatch<O>,
  ) {
    this.backoff = new RetryBackoff(`writing job ${kind}s`, logger);
  }

  push(outcome: O): void {
    this.pending.push(outcome);
    this.kick();
  }

  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.wakeFromBackoff?.(); // so shutdown does not wait out a 10 s backoff
    if (!this.flushing) this.dropUnwritten();
  }

  private dropUnwritten(): void {
    const dropped = this.pending.length;
    this.pending = [];
    if (dropped > 0) {
      this.logger.error(`shutdown: ${dropped} job ${this.kind}(s) could not be written in time; those jobs run again once their lease expires`);
    }
  }

  private kick(): void {
    if (this.closed) return;
    this.flushing ??= this.flush().finally(() => {
      this.flushing = undefined;
      if (this.pending.length) this.kick();
    });
  }

  private async flush(): Promise<void> {
    while (!this.closed && this.pending.length) {
      const batch = this.pending.splice(0, this.maxBatch);
      const { retry, error } = await this.writeIsolating(batch);
      if (error === undefined) {
        this.backoff.succeeded();
        continue;
      }
      this.pending.unshift(...retry); // a statement that failed wrote nothing (each is atomic)
      const backoff = wakeableSleep(this.backoff.failed(error));
      this.wakeFromBackoff = backoff.wake;
      await backoff.done;
    }
    if (this.closed) this.dropUnwritten();
  }

  /**
   * Writes a batch; when the database refuses it, halves it until the refused outcomes are alone, so one bad
   * row costs about 2 log2(batch) statements and holds back no other. Returns what is left to retry and why.
   */
  private async writeIsolating(batch: O[]): Promise<{ retry: O[]; error?: unknown }> {
    let statusOf;
    try {
      statusOf = await this.lane.run(() => this.writeBatch(batch));
    } catch (error) {
      if (!refusedByDatabase(error)) {
        this.sink.unreachable();
        return { retry: batch, error };
      }
      if (batch.length > 1) {
        const half = batch.length >> 1;
        const first = await this.writeIsolating(batch.slice(0, half));
        if (first.error !== undefined && !refusedByDatabase(first.error)) return { retry: [...first.retry, ...batch.slice(half)], error: first.error };
        const second = await this.writeIsolating(batch.slice(half));
        return { retry: [...first.retry, ...second.retry], error: second.error ?? first.error };
      }
      const [one] = batch;
      one.refusals += 1;
      if (one.refusals < MAX_OUTCOME_REFUSALS) return { retry: batch, error };
      this.logger.error(OUTCOME_UNWRITABLE(one.id, one.queue, this.kind, one.refusals, errorLine(error)));
      this.sink.written(batch, () => 'dropped');
      return { retry: [] };
    }
    this.sink.written(batch, statusOf);
    return { retry: [] };
  }
}

/**
 * The database answered and refused the statement for what it holds (bad data, a constraint, a trigger), as
 * opposed to being unreachable or busy: connection and resource errors, operator intervention (shutdown,
 * statement timeout), deadlocks and serialisation failures, a lock timeout, a read-only standby, and any error
 * without a SQLSTATE (network, pool) all mean "try the same write again later".
 */
function refusedByDatabase(error: unknown): boolean {
  if (!(error instanceof pg.DatabaseError) || typeof error.code !== 'string') return false;
  return !/^(08|53|57|58|40)/.test(error.code) && error.code !== '55P03' && error.code !== '25006';
}

/**
 * The second look at the dependents and flows of flow jobs a settle finished, once the settle committed (why:
 * FLOW_FUNCTIONS in store/flow.sql.ts). One statement at a time, ids that arrive meanwhile ride the next. A look
 * that fails is logged and left to the sweeper, whose pass takes the same look at every stranded job and flow.
 */
class FlowRechecker<O extends PendingOutcome> {
  private pending: O[] = [];
  private running = false;

  constructor(
    private readonly store: JobStore,
    private readonly logger: LoggerService,
    private readonly events?: FlowEventSink<O>,
  ) {}

  recheck(jobs: readonly O[]): void {
    if (jobs.length === 0) return;
    this.pending.push(...jobs);
    if (!this.running) void this.run();
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (this.pending.length > 0) {
        const jobs = this.pending.splice(0, 1_000);
        const ids = jobs.map((j) => j.id);
        try {
          await this.store.flows.recheckFlowJobs(ids);
          // Only while someone listens: the flows these jobs ended, each announced once across all processes.
          if (this.events?.wanted()) {
            const byId = new Map(jobs.map((j) => [j.id, j]));
            for (const { jobId, flow } of await this.store.flows.announceFlows(ids)) this.events.finished(byId.get(jobId)!, flow);
          }
        } catch (error) {
          this.logger.warn(`flows: the second look at ${ids.length} finished flow job(s) failed (${errorLine(error)}); the sweeper's next pass takes it`);
        }
      }
    } finally {
      this.running = false;
    }
  }
}

/** Where the 'flow-finished' events of this process's settles go (the worker pool's JobEvents). */
export interface FlowEventSink<O> {
  /** Whether anyone listens: the announcement costs a statement. */
  wanted(): boolean;
  finished(job: O, flow: FinishedFlow): void;
}

/** The jobs of a batch whose ids a settle statement named. */
function jobsOf<O extends PendingOutcome>(batch: readonly O[], ids: readonly string[]): O[] {
  const wanted = new Set(ids);
  return batch.filter((o) => wanted.has(o.id));
}
