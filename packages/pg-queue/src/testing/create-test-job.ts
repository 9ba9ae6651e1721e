import type { Job } from '../interfaces/job.interface.js';
import { JobAttempt } from '../worker/job-attempt.js';

export interface TestJobFields {
  /** Default 'test'. */
  queue?: string;
  /** Default '1'. */
  id?: string;
  /** Default 1. */
  attempt?: number;
  /** Default 5. */
  maxAttempts?: number;
  /** Default 0. */
  priority?: number;
  /** Default: now. */
  runAt?: Date;
  /** Default: runAt. */
  createdAt?: Date;
  /**
   * Steps recorded by earlier attempts, by name (a result, or undefined): job.step() returns them without running
   * its function, as a retry would. Steps the handler records are kept in memory: read them with `recordedSteps()`.
   */
  steps?: Record<string, unknown>;
}

/** A Job for calling a handler method directly; `abort(reason)` aborts its signal as a timeout, cancel or shutdown would. */
export type TestJob<TPayload> = Job<TPayload> & {
  abort(reason: Error): void;
  /** The steps recorded so far (given in `steps`, and run by the handler), in order: { name, result }. */
  recordedSteps(): { name: string; result?: unknown }[];
  /**
   * The lines the handler logged with job.log(), in order, as the queue would keep them: the newest 100, each cut to
   * 2,000 characters (the defaults of the module's `jobLogs`).
   */
  loggedLines(): string[];
};

/**
 * A Job as a handler receives it, with no queue behind it: for unit tests of a handler's own logic, without a
 * database (`await mailer.send(createTestJob({ to: 'ada@example.com' }))`). Nothing is stored and nothing
 * settles: what the handler returns or throws is the test's to assert.
 */
export function createTestJob<TPayload>(payload: TPayload, fields: TestJobFields = {}): TestJob<TPayload> {
  const runAtMs = (fields.runAt ?? new Date()).getTime();
  const at = new Date().toISOString();
  const recordedSteps = Object.entries(fields.steps ?? {}).map(([name, result]) => ({ name, ...(result === undefined ? {} : { result }), attempt: 0, at }));
  const job = new JobAttempt<TPayload>(
    fields.queue ?? 'test',
    {
      id: fields.id ?? '1',
      payload,
      attempt: fields.attempt ?? 1,
      token: '1',
      maxAttempts: fields.maxAttempts ?? 5,
      priority: fields.priority ?? 0,
      runAtMs,
      createdAtMs: fields.createdAt?.getTime() ?? runAtMs,
    },
    { recordedSteps },
  );
  return Object.assign(job, {
    recordedSteps: () => job.stepRunner().inMemory.map((s) => ('result' in s ? { name: s.name, result: s.result } : { name: s.name })),
    // loggedLines(): the Job's own (JobAttempt keeps the lines of a job with no database behind it).
  });
}
