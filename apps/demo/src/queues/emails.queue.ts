import { defineQueue } from 'nestjs-pg-queue';
import { firstProblem, textProblem } from './payload-checks.js';

/** Payload of the `emails` queue: everything the handler needs, so that it never reads the order back. */
export interface EmailPayload {
  to: string;
  subject: string;
  body: string;
  orderId?: string;
}

/**
 * The `emails` queue with its payload type: `enqueue(Emails, ...)` and `@JobHandler(Emails)` are checked by the
 * compiler; the validator checks what the compiler cannot see (the CLI, raw SQL, a cast) at every enqueue in this
 * app, and before each run, so that a job enqueued elsewhere with a wrong payload fails for good instead of
 * sending "undefined" to undefined.
 */
export const Emails = defineQueue<EmailPayload>('emails', {
  validate: (payload) =>
    firstProblem(payload, '{ to, subject, body, orderId? }', (p) => [
      // The address's format is a business rule the order checks in its transaction (orderRejection), after the enqueue.
      textProblem('to', p.to),
      textProblem('subject', p.subject, { nonEmpty: true }),
      textProblem('body', p.body),
      textProblem('orderId', p.orderId, { optional: true }),
    ]),
});
