import { JobAbortedError, JobSnoozedError, PgQueueError } from '../errors/pg-queue.error.js';
import type { Jsonified } from '../interfaces/jsonified.js';
import { STEP_NOT_RECORDED } from '../pg-queue.messages.js';
import type { LoadedSteps, StepStore } from '../store/step.store.js';
import { storedResult } from '../worker/stored-result.js';
import type { StoredStep } from './step.interfaces.js';

/** Steps one job may record: each record rewrites the job's steps array, so a job of thousands of steps is a flow's work. */
export const MAX_STEPS_PER_JOB = 1_000;
/** The longest step name. */
export const MAX_STEP_NAME_LENGTH = 200;
/** The longest sleep: a year, as for a snooze. */
export const MAX_SLEEP_MS = 365 * 24 * 3_600_000;

/** What a running job's steps need from the queue: the store, this process's worker id (the fence), the result limit. */
export interface StepAccess {
  readonly store: StepStore;
  readonly workerId: string;
  readonly maxResultBytes: number;
}

/** The attempt a JobSteps works for: its identity, its fence token, and its abort reason once aborted. */
export interface StepOwner {
  readonly id: string;
  readonly queue: string;
  readonly token: string;
  readonly attempt: number;
  abortReason(): unknown;
}

/**
 * One attempt's durable steps (job.step, job.sleep). At the first call, the steps the job recorded in earlier
 * attempts are read (one query); a step found there returns its stored result without running, any other runs
 * and is recorded, fenced by this attempt's claim, before its result is returned. What a step returns is always
 * the JSON round trip of its result, on the first run as on a replay, so that code that works once works again.
 *
 * Without a store (createTestJob, the testing kit's inline mode) the steps are kept in memory: `recorded` seeds
 * them, to test a handler's replay.
 */
export class JobSteps {
  private loaded: Promise<LoadedSteps> | undefined;
  /** Names used in this attempt: a repeated name is a defect of the handler (two different steps, one record). */
  private readonly used = new Set<string>();
  private readonly memory: StoredStep[];

  constructor(
    private readonly owner: StepOwner,
    private readonly access?: StepAccess,
    recorded: readonly StoredStep[] = [],
  ) {
    this.memory = [...recorded];
  }

  /** The steps recorded so far, for a job without a store (createTestJob). */
  get inMemory(): readonly StoredStep[] {
    return this.memory;
  }

  async step<T>(name: string, run: () => T | PromiseLike<T>): Promise<Jsonified<T>> {
    this.claimName('step', name);
    if (typeof run !== 'function') throw new PgQueueError(`job ${this.owner.id} (${this.owner.queue}): step "${name}" needs a function to run.`);
    const { steps } = await this.load();
    const found = steps.find((s) => s.name === name);
    if (found) {
      if (found.until !== undefined) throw new PgQueueError(`job ${this.owner.id} (${this.owner.queue}): "${name}" was recorded as a sleep, not a step; give the step another name.`);
      return found.result as Jsonified<T>;
    }
    this.refuseIfAborted(name);
    if (steps.length >= MAX_STEPS_PER_JOB) {
      throw new PgQueueError(`job ${this.owner.id} (${this.owner.queue}): step "${name}" would be its step number ${steps.length + 1}, over the limit of ${MAX_STEPS_PER_JOB}; split the work into jobs of a flow.`);
    }
    const value = await run();
    const entry: { name: string; result?: unknown } = { name };
    if (value !== undefined) {
      const stored = storedResult(this.owner.queue, this.owner.id, value, this.access?.maxResultBytes ?? Infinity, name);
      if ('refused' in stored) throw stored.refused;
      entry.result = JSON.parse(stored.json);
    }
    await this.record(entry, null);
    return entry.result as Jsonified<T>;
  }

  async sleep(name: string, ms: number): Promise<void> {
    this.claimName('sleep', name);
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0 || ms > MAX_SLEEP_MS) {
      throw new PgQueueError(`job ${this.owner.id} (${this.owner.queue}): sleep "${name}" needs a number of ms from 0 to ${MAX_SLEEP_MS} (a year); got ${String(ms)}.`);
    }
    const { steps, nowMs } = await this.load();
    const found = steps.find((s) => s.name === name);
    if (found) {
      if (found.until === undefined) throw new PgQueueError(`job ${this.owner.id} (${this.owner.queue}): "${name}" was recorded as a step, not a sleep; give the sleep another name.`);
      // Woken early (a retry of the job, a manual "run now", another snooze's timer): sleep out the rest.
      const leftMs = Date.parse(found.until) - nowMs;
      if (leftMs > 0) throw new JobSnoozedError(Math.ceil(leftMs));
      return;
    }
    this.refuseIfAborted(name);
    await this.record({ name }, Math.round(ms));
    // Ends the attempt, uncharged (as a snooze): the job runs again once the sleep is over, and passes it.
    throw new JobSnoozedError(Math.round(ms));
  }

  private claimName(kind: 'step' | 'sleep', name: string): void {
    if (typeof name !== 'string' || name.length === 0 || name.length > MAX_STEP_NAME_LENGTH) {
      throw new PgQueueError(`job ${this.owner.id} (${this.owner.queue}): a ${kind} needs a name of 1 to ${MAX_STEP_NAME_LENGTH} characters; got ${typeof name === 'string' ? `${name.length} characters` : typeof name}.`);
    }
    if (this.used.has(name)) {
      throw new PgQueueError(`job ${this.owner.id} (${this.owner.queue}): "${name}" was already used by a step or sleep of this attempt; each needs a name of its own (a loop can add the item's id to the name).`);
    }
    this.used.add(name);
  }

  private refuseIfAborted(name: string): void {
    const reason = this.owner.abortReason();
    if (reason === undefined) return;
    throw reason instanceof Error ? reason : new JobAbortedError(`job ${this.owner.id}: step "${name}" not run: the attempt was aborted`);
  }

  private load(): Promise<LoadedSteps> {
    if (!this.access) return Promise.resolve({ steps: this.memory, nowMs: Date.now() });
    if (!this.loaded) {
      this.loaded = this.access.store.loadSteps(this.owner.id);
      // A failed read is tried again at the next call (the call that saw it throws).
      this.loaded.catch(() => (this.loaded = undefined));
    }
    return this.loaded;
  }

  private async record(entry: { name: string; result?: unknown }, sleepMs: number | null): Promise<void> {
    const { steps } = await this.load();
    if (!this.access) {
      const at = Date.now();
      steps.push({ ...entry, attempt: this.owner.attempt, at: new Date(at).toISOString(), ...(sleepMs === null ? {} : { until: new Date(at + sleepMs).toISOString() }) });
      return;
    }
    const nowMs = await this.access.store.recordStep(this.access.workerId, this.owner, JSON.stringify(entry), sleepMs);
    if (nowMs === undefined) throw new JobAbortedError(STEP_NOT_RECORDED(this.owner.queue, this.owner.id, entry.name));
    steps.push({ ...entry, attempt: this.owner.attempt, at: new Date(nowMs).toISOString() });
  }
}
