import { PgQueueError } from '../errors/pg-queue.error.js';
import { describe, INVALID_QUEUE_DEFINITION } from '../pg-queue.messages.js';
import { assertQueueName } from '../utils/resolve-options.js';
import type { PayloadValidator } from './payload-validator.js';
import { registerValidator } from './payload-validators.js';

export type { PayloadValidator } from './payload-validator.js';

/** Options of `defineQueue`. */
export interface QueueDefinitionOptions {
  /**
   * Checks every payload enqueued to this queue, before anything is stored: through this definition, and by
   * the queue's name (`enqueue('emails', ...)`) in a process where the definition was loaded. One validator per
   * queue name.
   */
  validate?: PayloadValidator;
}

/**
 * A queue's name with its payload and result types, made once by `defineQueue` and used wherever the queue is
 * named: `@JobHandler(Emails)`, `queue.enqueue(Emails, payload)`, `enqueueMany([{ queue: Emails, payload }])`.
 */
export interface QueueDefinition<TPayload = unknown, TResult = unknown> {
  readonly name: string;
  readonly validate: PayloadValidator | undefined;
  /** Types only: never set at run time. Carries TPayload and TResult to enqueue and @JobHandler. */
  readonly '~types'?: { readonly payload: TPayload; readonly result: TResult };
}

/** The payload type of a queue definition. */
export type PayloadOf<Q> = Q extends QueueDefinition<infer P, unknown> ? P : never;
/** The result type of a queue definition. */
export type ResultOf<Q> = Q extends QueueDefinition<unknown, infer R> ? R : never;

const KNOWN_OPTIONS = new Set(['validate']);

/**
 * Declares a queue with its payload type (and its handler's result type), so that a wrong payload or handler is
 * a compile error; optionally with a runtime validator run at every enqueue:
 *
 *     export const Emails = defineQueue<{ to: string; subject: string }, { messageId: string }>('emails', {
 *       validate: (p) => typeof (p as { to?: unknown }).to === 'string' || 'to must be a string',
 *     });
 *
 * A bad name or option throws here, at import time.
 */
export function defineQueue<TPayload, TResult = unknown>(name: string, options: QueueDefinitionOptions = {}): QueueDefinition<TPayload, TResult> {
  assertQueueName(name);
  if (options === null || typeof options !== 'object') throw new PgQueueError(INVALID_QUEUE_DEFINITION(name, `options must be an object, got ${describe(options)}.`));
  const unknown = Object.keys(options).filter((key) => !KNOWN_OPTIONS.has(key));
  if (unknown.length > 0) throw new PgQueueError(INVALID_QUEUE_DEFINITION(name, `unknown option "${unknown[0]}"; known options: ${[...KNOWN_OPTIONS].join(', ')}.`));
  const { validate } = options;
  if (validate !== undefined && typeof validate !== 'function') {
    throw new PgQueueError(INVALID_QUEUE_DEFINITION(name, `validate must be a function (payload) => void | boolean | string, got ${describe(validate)}.`));
  }
  if (validate) registerValidator(name, validate);
  return Object.freeze({ name, validate });
}

/** The queue name of a `string | QueueDefinition` argument (checked later by assertQueueName, like any name). */
export function queueNameOf(queue: string | QueueDefinition<unknown, unknown>): string {
  return typeof queue === 'object' && queue !== null ? queue.name : queue;
}
