import { PgQueueError } from './pg-queue.error.js';

/**
 * A queue's validator (defineQueue's `validate`) refused a payload at enqueue. Nothing of the call was stored
 * (for enqueueMany: no job of the batch). `cause` is what the validator threw, if it threw.
 */
export class InvalidPayloadError extends PgQueueError {
  override name = 'InvalidPayloadError';

  constructor(
    message: string,
    /** The queue whose validator refused the payload. */
    readonly queue: string,
    /** What the validator said: its message, its returned string, or that it returned false. */
    readonly reason: string,
    /** enqueueMany / enqueueManyUnique: the position of the refused job in the call. */
    readonly index?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
