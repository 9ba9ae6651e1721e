import { PgQueueError } from '../errors/pg-queue.error.js';
import { RESULT_NOT_JSON, RESULT_TOO_LARGE, STEP_RESULT_NOT_JSON, STEP_RESULT_TOO_LARGE } from '../pg-queue.messages.js';
import { serializeValue } from '../utils/serialize-payload.js';

/** A result the queue cannot store (not JSON, over maxResultBytes): the attempt fails, and the job with it. */
export class ResultRefusedError extends PgQueueError {
  override name = 'ResultRefusedError';
}

/**
 * What a completion stores of a handler's return value (or a durable step of its function's, `step` naming it): its
 * JSON text, or the error that fails the job for good (a retry would return the same). Callers skip undefined and null before calling: they store nothing.
 */
export function storedResult(queue: string, jobId: string, result: unknown, maxBytes: number, step?: string): { json: string } | { refused: ResultRefusedError } {
  const json = serializeValue(result, 'the result', maxBytes);
  if (json.problem !== undefined) {
    return { refused: new ResultRefusedError(step === undefined ? RESULT_NOT_JSON(queue, jobId, json.problem) : STEP_RESULT_NOT_JSON(queue, jobId, step, json.problem)) };
  }
  if (json.bytes > maxBytes) {
    return { refused: new ResultRefusedError(step === undefined ? RESULT_TOO_LARGE(queue, jobId, json.bytes, maxBytes) : STEP_RESULT_TOO_LARGE(queue, jobId, step, json.bytes, maxBytes)) };
  }
  return { json: json.text };
}
