// Ids as text (jobs, flows, an event's serial): PostgreSQL's bigint, checked in JavaScript before a statement casts
// them, so that an id past the column's range is a clear error (or "no such job") rather than the database's.

/** The largest bigint (int8). */
export const INT8_MAX = 9_223_372_036_854_775_807n;

/** Positive decimal digits without a leading zero, at most 19 of them (passes 9999999999999999999: see isBigintId). */
export const BIGINT_ID_DIGITS = /^[1-9][0-9]{0,18}$/;

/** A positive integer within bigint's range, as text. */
export function isBigintId(text: string): boolean {
  return BIGINT_ID_DIGITS.test(text) && BigInt(text) <= INT8_MAX;
}
