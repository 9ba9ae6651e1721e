// Texts of the command line's errors, as small factories so that tests and code share one wording.

export const NO_DATABASE_URL = () => 'no database: pass --url postgres://... or set DATABASE_URL';

export const BAD_DURATION = (option: string, value: string) =>
  `${option} ${JSON.stringify(value)} is not a duration: use a number with a unit, e.g. 90s, 30m, 6h, 7d (ms, s, m, h, d, w)`;

export const BAD_NUMBER = (option: string, value: string, expected: string) => `${option} ${JSON.stringify(value)} is not ${expected}`;

export const BAD_JSON = (detail: string) => `the payload is not JSON: ${detail}`;

export const BAD_JOB_ID = (id: string) => `${JSON.stringify(id)} is not a job id (a positive integer)`;

export const BAD_STATUS = (value: string, allowed: readonly string[]) => `--status ${JSON.stringify(value)}: expected one of ${allowed.join(', ')}`;

export const STATUS_NOT_ALLOWED = (action: string, status: string, allowed: readonly string[]) =>
  `jobs ${action} applies to ${allowed.join(' or ')} jobs; --status ${status} matches none it could change`;

export const NO_TARGET = (action: string) =>
  `jobs ${action} needs job ids or at least one filter (--queue, --status, --older-than, --error); to act on every job, pass --all`;

export const IDS_AND_FILTERS = (action: string) => `jobs ${action}: give job ids or filters, not both`;

export const NOT_CONFIRMED_NO_TTY = (summary: string) =>
  `${summary}: not confirmed (stdin is not a terminal, so no question can be asked); pass --yes to go ahead, or --dry-run to only count`;

export const JOB_NOT_FOUND = (id: string) => `job ${id} not found`;

export const NO_MIGRATION_TO_UNDO = () => 'no queue migration is applied: nothing to undo';
