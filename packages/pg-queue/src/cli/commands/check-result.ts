export type CheckState = 'ok' | 'warn' | 'fail';

/** One line of `pg-queue doctor`. */
export interface CheckResult {
  check: string;
  state: CheckState;
  /** What was found, in one line. */
  detail: string;
  /** What to do about it (warn and fail only). */
  hint?: string;
}
