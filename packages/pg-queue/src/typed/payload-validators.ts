import { InvalidPayloadError } from '../errors/invalid-payload.error.js';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { PAYLOAD_REFUSED, QUEUE_DEFINED_TWICE, VALIDATOR_SAID_NO } from '../pg-queue.messages.js';
import { errorLine } from '../utils/error-text.js';
import type { PayloadValidator } from './payload-validator.js';

/**
 * The validators of the queues defined in this process, by name, so that an enqueue by the queue's name is
 * checked like one through its definition. Process-wide, as the definitions themselves are (module constants).
 */
const validators = new Map<string, PayloadValidator>();

export function registerValidator(queue: string, validate: PayloadValidator): void {
  const existing = validators.get(queue);
  if (existing && existing !== validate) throw new PgQueueError(QUEUE_DEFINED_TWICE(queue));
  validators.set(queue, validate);
}

/**
 * The validator of a queue, whether the enqueue names it or passes its definition (a definition's validator is
 * the one registered under its name: defineQueue refuses a second one). No lookup while no queue has one.
 */
export function validatorOf(queue: string): PayloadValidator | undefined {
  return validators.size === 0 ? undefined : validators.get(queue);
}

/** One payload to judge: where it comes from in the call, for the error. */
export interface PayloadToCheck {
  queue: string;
  payload: unknown;
  validate: PayloadValidator;
  /** Its position in an enqueueMany call. */
  index?: number;
}

/**
 * Runs the validators; throws InvalidPayloadError for the first refused payload (in call order). Synchronous
 * validators are judged without a promise; async ones are awaited together.
 */
export function checkPayloads(where: string, checks: PayloadToCheck[]): void | Promise<void> {
  const verdicts = checks.map(({ validate, payload }) => judgePayload(validate, payload));
  if (!verdicts.some(isThenable)) return refuseFirst(where, checks, verdicts as Verdict[]);
  return Promise.all(verdicts).then((settled) => refuseFirst(where, checks, settled));
}

/** A validator's answer: why it refused the payload (and what it threw, if it threw), or undefined when it accepted it. */
export type Verdict = { reason: string; cause?: unknown } | undefined;

/** What a validator says of one payload; a promise only when the validator answered with one. Never throws. */
export function judgePayload(validate: PayloadValidator, payload: unknown): Verdict | Promise<Verdict> {
  let answer: unknown;
  try {
    answer = validate(payload);
  } catch (error) {
    return thrown(error);
  }
  return isThenable(answer) ? Promise.resolve(answer).then(verdictOf, thrown) : verdictOf(answer);
}

function verdictOf(answer: unknown): Verdict {
  if (answer === false) return { reason: VALIDATOR_SAID_NO };
  if (typeof answer === 'string') return { reason: answer };
  return undefined;
}

function thrown(error: unknown): Verdict {
  return { reason: error instanceof Error ? error.message : errorLine(error), cause: error };
}

function refuseFirst(where: string, checks: PayloadToCheck[], verdicts: Verdict[]): void {
  const at = verdicts.findIndex((v) => v !== undefined);
  if (at < 0) return;
  const { queue, index } = checks[at];
  const { reason, cause } = verdicts[at]!;
  const place = index === undefined ? where : `${where}: job #${index}`;
  throw new InvalidPayloadError(PAYLOAD_REFUSED(place, queue, reason), queue, reason, index, cause === undefined ? undefined : { cause });
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}
