import { Inject, Injectable, type BeforeApplicationShutdown } from '@nestjs/common';
import { PgQueueConnection } from '../connection/pg-queue-connection.js';
import { JobFailedError, JobWaitTimeoutError, PgQueueError } from '../errors/pg-queue.error.js';
import { RESOLVED_OPTIONS } from '../pg-queue.constants.js';
import { WAIT_JOB_GONE, WAIT_JOB_NOT_FOUND, WAIT_SHUTTING_DOWN } from '../pg-queue.messages.js';
import { DONE_CHANNEL } from '../store/shared.sql.js';
import { JobStore } from '../store/job.store.js';
import type { JobOutcome } from '../store/job-store.types.js';
import { RetryBackoff } from '../utils/retry-backoff.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import { NotificationListener } from '../worker/notification-listener.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';

export interface WaitOptions {
  /** Reject with JobWaitTimeoutError after this long. Default: no limit. */
  timeoutMs?: number;
  /** Stop waiting when aborted: rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** One waitFor() call. */
interface Waiter {
  resolve(result: unknown): void;
  reject(error: unknown): void;
}

/** The first retry of a failed read of the awaited jobs (then doubling, up to the poll's interval). */
const RETRY_FIRST_MS = 250;

/**
 * The waiting side of QueueService.waitFor(), for jobs run by any process. A waiter marks its job's row
 * (awaited; the mark of a queued, due job also wakes its queue, since a claim skips the row while the mark
 * locks it: see markAwaited in job-read.sql.ts); the statement that finishes a marked job sends "id:status" on
 * DONE_CHANNEL, in the same statement, so queues nobody waits on send nothing. This instance LISTENs on its own connection (opened at
 * the first waitFor, on listenerUrl when set) and reads the outcome of the jobs it hears about, batched into
 * one statement. A notice can be missed (the LISTEN connection was down, or came up after the job finished),
 * so every waited job is also read when LISTEN comes up and by a poll: every pollIntervalMs while LISTEN is
 * up, every fallbackPollIntervalMs while it is down.
 */
@Injectable()
export class JobWaiters implements BeforeApplicationShutdown {
  private readonly logger = new PgQueueLogger('PgQueue');
  private readonly waiting = new Map<string, Set<Waiter>>();
  /** waitForFlow's pauses, by flow id (see flowNotice). */
  private readonly flowNotices = new Map<string, Set<() => void>>();
  /** Ids to read at the next check, with the status a notice gave (a job deleted at completion leaves no row). */
  private readonly toCheck = new Map<string, string | undefined>();
  private checking: Promise<void> | undefined;
  /** Failed reads of the awaited jobs: the backoff to the next try (from RETRY_FIRST_MS up to the poll) and its timer. */
  private readonly readBackoff: RetryBackoff;
  private retryTimer: NodeJS.Timeout | undefined;
  private listener: NotificationListener | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private pollEveryMs: number;
  private closed = false;

  constructor(
    private readonly store: JobStore,
    private readonly connection: PgQueueConnection,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {
    this.pollEveryMs = options.fallbackPollIntervalMs; // until LISTEN is up
    this.readBackoff = new RetryBackoff('waitFor: reading the awaited jobs', this.logger, RETRY_FIRST_MS, options.pollIntervalMs);
  }

  /** The LISTEN connection's settings (on listenerUrl when set), which an event stream's listener dials too. */
  get listenerConfig() {
    return this.connection.listenerConfig;
  }

  /** Resolves with the job's result once it completes; rejects when it fails for good or is cancelled. */
  wait(id: string, { timeoutMs, signal }: WaitOptions): Promise<unknown> {
    if (this.closed) return Promise.reject(new PgQueueError(WAIT_SHUTTING_DOWN(id)));
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<unknown>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => waiter.reject(signal!.reason);
      // Whichever way it ends, the waiter leaves the map and drops its timer and abort listener.
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const set = this.waiting.get(id);
        set?.delete(waiter);
        if (set?.size === 0) this.waiting.delete(id);
        if (this.waiting.size === 0) this.stopPoll();
      };
      const waiter: Waiter = {
        resolve: (result) => {
          done();
          resolve(result);
        },
        reject: (error) => {
          done();
          reject(error);
        },
      };
      let set = this.waiting.get(id);
      if (!set) this.waiting.set(id, (set = new Set()));
      set.add(waiter);
      if (timeoutMs !== undefined) timer = setTimeout(() => waiter.reject(new JobWaitTimeoutError(id, timeoutMs)), timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.startListening();
      this.startPoll();
      this.store.markAwaited(id).then(
        (outcome) => {
          if (outcome === null) waiter.reject(new PgQueueError(WAIT_JOB_NOT_FOUND(id)));
          else this.settle(id, outcome);
        },
        (error: unknown) => waiter.reject(error),
      );
    });
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.closed = true;
    this.stopPoll();
    clearTimeout(this.retryTimer);
    for (const [id, set] of [...this.waiting]) for (const waiter of [...set]) waiter.reject(new PgQueueError(WAIT_SHUTTING_DOWN(id)));
    await this.listener?.close();
  }

  /** Settles the waiters of a job that has finished; a job still queued or running keeps them waiting. */
  private settle(id: string, outcome: JobOutcome): void {
    const { status } = outcome;
    if (status === 'queued' || status === 'processing' || status === 'blocked') return;
    for (const waiter of [...(this.waiting.get(id) ?? [])]) {
      if (status === 'completed') waiter.resolve(outcome.result);
      else waiter.reject(new JobFailedError(id, status, outcome.lastError));
    }
  }

  private startListening(): void {
    if (this.listener) return;
    this.listener = new NotificationListener(
      this.connection.listenerConfig,
      {
        onJobs: () => undefined,
        onCancel: () => undefined,
        onDone: (id, status) => {
          if (this.waiting.has(id)) this.check([id], status);
        },
        onFlowDone: (id) => this.wakeFlowWaiters(id),
        onUp: () => {
          this.pollEveryMs = this.options.pollIntervalMs;
          this.restartPoll();
          this.check([...this.waiting.keys()]); // a notice sent before LISTEN was up is lost
          for (const id of [...this.flowNotices.keys()]) this.wakeFlowWaiters(id);
        },
        onDown: () => {
          this.pollEveryMs = this.options.fallbackPollIntervalMs;
          this.restartPoll();
        },
      },
      this.logger,
      undefined,
      [DONE_CHANNEL],
    );
    this.listener.start();
  }

  /**
   * waitForFlow's pause between two reads of the flow: it ends at the flow's finish notice (its settle sends one on
   * DONE_CHANNEL, heard on this instance's LISTEN connection), after `ms` (the poll: a notice can be missed), or when
   * `signal` aborts. Registered before the caller's read, so a notice sent during the read is not missed. `cancel`
   * drops it (the read found the flow ended).
   */
  flowNotice(id: string, ms: number, signal?: AbortSignal): { heard: Promise<void>; cancel: () => void } {
    if (!this.closed) this.startListening();
    let end!: () => void;
    const heard = new Promise<void>((resolve) => {
      const set = this.flowNotices.get(id) ?? new Set<() => void>();
      this.flowNotices.set(id, set);
      const timer = setTimeout(() => end(), ms);
      end = () => {
        clearTimeout(timer);
        set.delete(end);
        if (set.size === 0) this.flowNotices.delete(id);
        signal?.removeEventListener('abort', end);
        resolve();
      };
      set.add(end);
      signal?.addEventListener('abort', end, { once: true });
    });
    return { heard, cancel: () => end() };
  }

  private wakeFlowWaiters(id: string): void {
    for (const end of [...(this.flowNotices.get(id) ?? [])]) end();
  }

  /** Reads the outcome of `ids` soon, in one statement with any other ids asked for meanwhile. */
  private check(ids: string[], heard?: string): void {
    for (const id of ids) this.toCheck.set(id, heard ?? this.toCheck.get(id));
    this.checking ??= this.runChecks().finally(() => (this.checking = undefined));
  }

  private async runChecks(): Promise<void> {
    while (this.toCheck.size > 0 && !this.closed) {
      const batch = new Map(this.toCheck);
      this.toCheck.clear();
      const ids = [...batch.keys()].filter((id) => this.waiting.has(id));
      if (ids.length === 0) continue;
      let outcomes: Map<string, JobOutcome>;
      try {
        outcomes = await this.store.jobOutcomes(ids);
        this.readBackoff.succeeded();
      } catch (error) {
        // Tried again with backoff from a quarter second up to the poll, the ids kept: LISTEN can be back before the
        // pool's connections are (PgBouncer refuses logins for server_login_retry after a restart of PostgreSQL),
        // and the notices it heard, or the read after it came up, would otherwise wait for the next poll (the
        // simulation's seed 44: answers 17-27 s late). One line per outage, not one per try (RetryBackoff).
        const delayMs = this.readBackoff.failed(error);
        for (const [id, heard] of batch) if (!this.toCheck.has(id)) this.toCheck.set(id, heard);
        this.retryTimer ??= setTimeout(() => {
          this.retryTimer = undefined;
          this.check([]);
        }, delayMs);
        return;
      }
      for (const id of ids) {
        const outcome = outcomes.get(id);
        if (outcome) this.settle(id, outcome);
        // Completed, then pruned before this read (completedRetentionMs 0 keeps an awaited job's row only until the
        // next prune): the notice is all that is left of it.
        else if (batch.get(id) === 'completed') this.settle(id, { status: 'completed', result: null, lastError: null });
        else for (const waiter of [...(this.waiting.get(id) ?? [])]) waiter.reject(new PgQueueError(WAIT_JOB_GONE(id)));
      }
    }
  }

  private startPoll(): void {
    this.pollTimer ??= setInterval(() => this.check([...this.waiting.keys()]), this.pollEveryMs);
  }

  private restartPoll(): void {
    if (this.pollTimer === undefined) return;
    this.stopPoll();
    this.startPoll();
  }

  private stopPoll(): void {
    clearInterval(this.pollTimer);
    this.pollTimer = undefined;
  }
}
