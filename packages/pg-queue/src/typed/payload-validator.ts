/**
 * Judges a payload at enqueue. It refuses the payload by throwing (the error's message is the reason), by
 * returning `false`, or by returning a string (the reason); anything else (nothing, `true`, a parsed value)
 * accepts it. It may be async (return a promise of the same). The payload is stored as it was given: what the
 * validator returns never replaces it. It receives `unknown`: a producer that enqueues by the queue's name, or
 * casts, can pass anything.
 */
export type PayloadValidator = (payload: unknown) => unknown;
