// Every SQL statement of the queue's jobs, gathered from its verb files: enqueue.sql.ts, enqueue-keyed.sql.ts,
// claim.sql.ts, settle.sql.ts, maintenance.sql.ts, job-read.sql.ts, job-control.sql.ts, database.sql.ts (shared
// pieces: shared.sql.ts). Named statements are prepared once per connection by node-postgres and reused (except
// PLANNED_PER_CALL below); all times come from the database clock (now(), clock_timestamp()).
import { CLAIM_SQL } from './claim.sql.js';
import { DATABASE_SQL } from './database.sql.js';
import { KEYED_ENQUEUE_SQL } from './enqueue-keyed.sql.js';
import { ENQUEUE_SQL } from './enqueue.sql.js';
import { JOB_CONTROL_SQL } from './job-control.sql.js';
import { JOB_READ_SQL } from './job-read.sql.js';
import { MAINTENANCE_SQL } from './maintenance.sql.js';
import { QUEUE_LIMITS_SQL } from './queue-limits.sql.js';
import { SETTLE_SQL } from './settle.sql.js';

export const SQL = {
  ...ENQUEUE_SQL,
  ...KEYED_ENQUEUE_SQL,
  ...CLAIM_SQL,
  ...SETTLE_SQL,
  ...MAINTENANCE_SQL,
  ...JOB_READ_SQL,
  ...JOB_CONTROL_SQL,
  ...DATABASE_SQL,
  ...QUEUE_LIMITS_SQL,
} as const;

/**
 * Statements keyed by arrays are sent unnamed, so PostgreSQL plans each call with the real arrays. Prepared,
 * they switch to a generic plan after five runs, which cannot see the array length: when these statements
 * still joined unnest(), that plan rescanned it for every row, and a 1,000-row completion batch took 294 ms
 * instead of 6.8 ms (processing at concurrency 50 fell from 6.5-7.2k to 2.2-5.6k jobs/s). Planning costs well
 * under a millisecond, once per batch.
 */
export const PLANNED_PER_CALL: ReadonlySet<keyof typeof SQL> = new Set([
  'completeJobs',
  'completeJobsWithResults',
  'completeJobsKeyless',
  'completeJobsWithResultsKeyless',
  'completeJobsWithLogs',
  'deleteCompletedJobs',
  'deleteCompletedJobsWithResults',
  'failJobs',
  'failJobsWithExtras',
  'failJobsWithLogs',
  'heartbeat',
  'heartbeatWithProgress',
  'heartbeatWithLogs',
  'releaseJobs',
  'releaseJobsWithLogs',
  'markStarted',
  'insertKeyedJobs',
  'insertKeyedJobsTraced',
  'insertKeyedJobsWakeDeferred',
  'insertKeyedJobsTracedWakeDeferred',
  'snoozeJobs',
  'snoozeJobsWithLogs',
  'markLimited',
]);
