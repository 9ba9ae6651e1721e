// Texts of the command line's errors, as small factories so that tests and code share one wording.

export const NO_DATABASE_URL = () => 'no database: pass --url postgres://... or set DATABASE_URL';

export const NO_NAMED_DATABASE_URL = (name: string, variable: string) => `no database "${name}": set ${variable} to its postgres:// URL`;

export const URL_AND_DATABASE = () => 'give --url or --database, not both';

export const NOT_A_POSTGRES_URL = (source: string) => `${source} is not a postgres:// URL`;

export const PASSWORD_IN_URL = () =>
  'warning: the password in --url can be read by other users of this machine while the command runs (ps, /proc/<pid>/cmdline), and stays in your shell history; ' +
  'put the URL in DATABASE_URL, or the password in PGPASSWORD or ~/.pgpass, instead';

export const CONNECT_TIMEOUT = (timeout: string) =>
  `no connection to the database within ${timeout} (--connect-timeout): check that the server is up and that the URL's host and port reach it; if it is only slow to answer, raise --connect-timeout`;

export const CANNOT_CONNECT = () => 'cannot connect to the database: no other check was run';

export const SCHEDULE_NOT_FOUND = (name: string) => `schedule ${JSON.stringify(name)} not found`;

/** Jobs given by id, none of them in a status the action changes (a retry of a completed job): an error, not "done". */
export const NOTHING_APPLIES = (verb: string, ids: string[], statuses: string[]) =>
  `job${ids.length > 1 ? 's' : ''} ${ids.join(', ')} ${ids.length > 1 ? 'are' : 'is'} not ${statuses.join(' or ')}, the only statuses ${verb} changes: nothing changed`;

export const JOBS_NOT_FOUND = (ids: string[]) => `job${ids.length > 1 ? 's' : ''} ${ids.join(', ')} not found: nothing changed`;

export const BAD_DURATION = (option: string, value: string) =>
  `${option} ${JSON.stringify(value)} is not a duration: use a number with a unit, e.g. 90s, 30m, 6h, 7d (ms, s, m, h, d, w)`;

export const BAD_NUMBER = (option: string, value: string, expected: string) => `${option} ${JSON.stringify(value)} is not ${expected}`;

export const BAD_INSTANT = (option: string, value: string) =>
  `${option} ${JSON.stringify(value)} is not a date-time: use ISO 8601, e.g. 2026-12-01T08:00:00Z (without an offset: this machine's time zone)`;

export const NO_SUCH_INSTANT = (option: string, value: string, why: string) =>
  `${option} ${JSON.stringify(value)} is not a date-time that exists (${why}): nothing was enqueued`;

export const BAD_JSON = (detail: string) => `the payload is not JSON: ${detail}`;

export const BAD_JOB_ID = (id: string) => `${JSON.stringify(id)} is not a job id (a positive integer)`;

export const BAD_STATUS = (value: string, allowed: readonly string[]) => `--status ${JSON.stringify(value)}: expected one of ${allowed.join(', ')}`;

export const STATUS_NOT_ALLOWED = (action: string, status: string, allowed: readonly string[]) =>
  `jobs ${action} applies to ${allowed.join(' or ')} jobs; --status ${status} matches none it could change`;

export const NO_TARGET = (action: string) =>
  `jobs ${action} needs job ids or at least one filter (--queue, --status, --older-than, --error); to act on every job, pass --all`;

export const IDS_AND_FILTERS = (action: string) => `jobs ${action}: give job ids or filters, not both`;

export const NOT_CONFIRMED_NO_TTY = (summary: string, dryRun = true) =>
  `${summary}: not confirmed (stdin is not a terminal, so no question can be asked); pass --yes to go ahead${dryRun ? ', or --dry-run to only count' : ''}`;

/** What undoing each queue migration drops (`pg-queue migrate down` says it before it asks). */
const MIGRATION_DOWN_DROPS: Record<string, string> = {
  CreateBackgroundJobs1764460000000: 'drops the table background_jobs (every job), its NOTIFY trigger and the status type',
  CreateBackgroundQueues1764470000000: 'drops the table background_queues (which queues are paused)',
  DelayedJobsIndex1764480000000: 'drops the index background_jobs_delayed_idx',
  InFlightIndexByJob1764490000000: 'puts the in-flight index back as it was',
  FenceToken1764520000000: "drops the column fence_token (running jobs' fences)",
  FinishedJobsIndex1764530000000: 'drops the index background_jobs_finished_idx',
  UniqueJobs1764540000000: 'drops the column unique_key, the unique index and the table background_job_keys (every unique key and uniqueForMs window)',
  CreateBackgroundSchedules1764550000000: 'drops the table background_schedules (every recurring schedule)',
  Limits1764560000000: 'drops the columns concurrency_key and limited, their indexes and the table background_queue_starts (rate-limit windows)',
  JobResults1764570000000: "drops the columns result, progress and awaited (every stored job result and progress)",
  TraceContext1764580000000: 'drops the column trace_context (the stored trace contexts)',
  DeferredWakeUps1764590000000: 'puts the NOTIFY trigger function back as it was',
  BufferedJobs1764600000000: 'drops the column buffered',
  Flows1764610000000:
    'drops the tables background_flows and background_job_deps (every flow and edge), the columns flow_id, flow_ref, compensate and compensates, ' +
    'and the flow trigger; jobs still blocked end cancelled',
  DurableSteps1764620000000: 'drops the column steps (every recorded step: jobs retried afterwards run their steps again)',
  AttemptHistory1764630000000: 'drops the table background_job_attempts (every recorded failed attempt)',
  SqlEnqueue1764640000000: 'drops the SQL functions pg_queue_enqueue, pg_queue_enqueue_unique and pg_queue_enqueue_many (triggers and scripts that call them fail from then on)',
  Instances1764650000000: 'drops the table background_instances (the instances registry; running instances log a failed write until it is back)',
  JobHistory1764660000000: 'drops the view background_jobs_all and the table background_jobs_history with its partitions (every finished job moved there)',
  FlowOperatorActions1764671390000: 'puts the flow step function back as it was (a retried compensation then leaves its flow compensation_failed)',
  SqlEnqueueRunAt1764672000000: 'puts the SQL enqueue functions back as SqlEnqueue1764640000000 made them (a run_at that does not exist raises 22008 again instead of 22023)',
  RuntimeLimits1764680000000: 'drops the limits set at runtime and the rate-limit blocks (the decorators\' limits apply again)',
  FairShare1764690000000: 'drops the tables background_queue_weights (every fair share weight stored at runtime; the fairness options\' weights apply again) and background_fair_passes, and the column fair_clock of background_queues',
  LifoQueueAfter1764700000000:
    'drops the column lifo (LIFO jobs are claimed FIFO again), the column lifo_jobs of background_queues, the table background_job_successors ' +
    'and the successor functions (a successor still waiting, onConflict \'queue-after\', stays blocked), and puts the SQL enqueue functions back as SqlEnqueueRunAt1764672000000 left them',
  JobLogs1764710000000: 'drops the column logs of background_jobs and background_jobs_history (every line job.log() wrote) and makes the view background_jobs_all again without it',
  RicherSchedules1764720000000:
    'deletes every schedule with an interval (every; their jobs stay), pauses every schedule that ended, and drops the columns every_ms, fire_limit, fires, start_at and end_at of background_schedules (limits, counts of fires, start and end dates)',
  JobEvents1764730000000: 'drops the table background_job_events (every recorded event), its triggers and functions, and the column record_events of background_queues',
  EventOrder1764740000000: 'puts the event triggers\' functions back as JobEvents1764730000000 made them (an event\'s tx is its writing transaction\'s xid again, and a job\'s events can be handed out out of order when two transactions overlap)',
  NestedEventOrder1764750000000:
    'puts the job event trigger\'s function back as EventOrder1764740000000 made it (when a flow step run inside a statement changes a job that statement changed, the later change\'s events are handed out first again)',
  FlowSettleAfterSteps1764760000000:
    'drops the function pg_queue_flow_advance (a statement that ends several jobs of one flow settles the flow after each job again, so a bulk action can end a flow completed before a later job of it fails it)',
  HistoryReturnEvents1764770000000:
    'puts the job event trigger\'s function back as NestedEventOrder1764750000000 made it (a job partitioned history gives back to a retry records an enqueued event again)',
  KeyPriorities1764780000000:
    'drops the index background_jobs_key_priority_idx (the keyed and fair claims then take each key\'s jobs by run_at alone, whatever their priority, as before)',
};

export const MIGRATION_DOWN_SUMMARY = (name: string) => `undo the queue migration ${name}: ${MIGRATION_DOWN_DROPS[name] ?? 'runs its down()'}`;

export const MIGRATION_CHANGED = (asked: string, now: string) => `the last applied queue migration changed while you answered (${asked}, now ${now}): nothing undone; run the command again`;

export const JOB_NOT_FOUND = (id: string) => `job ${id} not found`;

/** A change after enqueue that did not happen, with why (QueueService's ChangeResult). */
export const NOT_CHANGED = (id: string, answer: string) =>
  answer === 'not-found'
    ? JOB_NOT_FOUND(id)
    : answer === 'running'
      ? `job ${id} is running: it keeps what it started with; nothing changed`
      : answer === 'held'
        ? `job ${id} was read ahead by a worker and starts as it is; nothing changed`
        : `job ${id} is ${answer}: only a job that has not started can be changed; nothing changed`;

export const BAD_FLOW_ID = (id: string) => `${JSON.stringify(id)} is not a flow id (a positive integer)`;

export const FLOW_NOT_FOUND = (id: string) => `flow ${id} not found`;

export const NO_MIGRATION_TO_UNDO = () => 'no queue migration is applied: nothing to undo';
