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
}

/** A Job for calling a handler method directly; `abort(reason)` aborts its signal as a timeout, cancel or shutdown would. */
export type TestJob<TPayload> = Job<TPayload> & { abort(reason: Error): void };

/**
 * A Job as a handler receives it, with no queue behind it: for unit tests of a handler's own logic, without a
 * database (`await mailer.send(createTestJob({ to: 'ada@example.com' }))`). Nothing is stored and nothing
 * settles: what the handler returns or throws is the test's to assert.
 */
export function createTestJob<TPayload>(payload: TPayload, fields: TestJobFields = {}): TestJob<TPayload> {
  const runAtMs = (fields.runAt ?? new Date()).getTime();
  return new JobAttempt<TPayload>(fields.queue ?? 'test', {
    id: fields.id ?? '1',
    payload,
    attempt: fields.attempt ?? 1,
    token: '1',
    maxAttempts: fields.maxAttempts ?? 5,
    priority: fields.priority ?? 0,
    runAtMs,
    createdAtMs: fields.createdAt?.getTime() ?? runAtMs,
  });
}
