/** Namespaced metadata key for `@JobHandler`, as nestjs/bull does. */
export const JOB_HANDLER_METADATA = 'pg-queue:job_handler';

/** The app's TypeORM DataSource, when TypeOrmModule provides one (optional injection). */
export const TYPEORM_DATA_SOURCE = Symbol('pg-queue:typeorm_data_source');

/** Channel the insert trigger notifies with the queue name; workers LISTEN on it. */
export const JOBS_CHANNEL = 'pg_queue_jobs';

/**
 * Transaction-local setting an insert sets to 'deferred' when its sender wakes the workers itself after the
 * commit: the NOTIFY trigger then skips (and clears it). See Wake in store/shared.sql.ts.
 */
export const WAKE_SETTING = 'pg_queue.wake';

/** Advisory-lock keys (one int8 namespace): migrations, sweeper and pruner each run on one instance at a time. */
export const ADVISORY_LOCK = {
  migrate: 7_263_514_001,
  sweep: 7_263_514_002,
  prune: 7_263_514_003,
  history: 7_263_514_004,
  /** Making a history partition: its bounds are chosen from the partitions there, so one mover at a time. */
  historyPartitions: 7_263_514_005,
  /** pg_queue_record_events() (migration JobEvents1764730000000): one change of the recording queues at a time. */
  events: 7_263_514_006,
} as const;

/** First key of pg_advisory_xact_lock(int4, int4) for a limited queue's claim; the second is a hash of the queue name. */
export const LIMIT_LOCK_SPACE = 72_635_140;

/** Queue names reach SQL only as parameters; the pattern keeps them readable in logs and NOTIFY payloads. */
export const QUEUE_NAME_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;

/** The name of a PgQueueModule imported without `name` (docs/guides/several-databases.md). */
export const DEFAULT_DATABASE = 'default';

/** This module instance's database name (`name` next to the forRoot options; DEFAULT_DATABASE without one). */
export const DATABASE_NAME = Symbol('pg-queue:database_name');

/**
 * This module instance's QueueService, whatever its public token (the class for the default database, a string for a
 * named one): one token in every instance, so that the testing kit's inline mode replaces every database's service.
 */
export const DATABASE_QUEUE_SERVICE = Symbol('pg-queue:database_queue_service');

/** Database names show in injection tokens, log lines, metric labels and dashboard links: the queue-name alphabet, shorter. */
export const DATABASE_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

/** Namespaced metadata key for `@RecurringJob`. */
export const RECURRING_JOB_METADATA = 'pg-queue:recurring_job';

/** Largest value job.progress() takes, in bytes of JSON: progress is a number or a small object, written with every heartbeat. */
export const MAX_PROGRESS_BYTES = 4_096;

/** Namespaced metadata key for `@OnJobEvent` (a list: a method may carry several). */
export const ON_JOB_EVENT_METADATA = 'pg-queue:on_job_event';

/**
 * `prefetch: 'auto'`: jobs one queue's worker holds in hand at most (running plus read ahead), and its default
 * batchSize: the README's tuned short-job settings (`prefetch: 500 - concurrency, batchSize: 500`).
 */
export const AUTO_MAX_IN_HAND = 500;

/** A gone instance's row (it stopped writing it) is deleted by the sweeper this long after it expired. */
export const FORGET_GONE_INSTANCES_AFTER_MS = 3_600_000;

/**
 * The JobStore on the leases pool (connection/pg-client-config.ts, PoolRole): the workers' heartbeats, outcome
 * writes, put-backs and claims. The JobStore class token is the API pool's store (the app's calls).
 */
export const LEASE_JOB_STORE = Symbol('pg-queue:lease_job_store');

/** The JobStore on the maintenance pool: sweeper, pruner, history mover, the recurring tick's fires. */
export const MAINTENANCE_JOB_STORE = Symbol('pg-queue:maintenance_job_store');

/** The ScheduleStore on the maintenance pool (the recurring tick); the ScheduleStore class token is the API pool's. */
export const MAINTENANCE_SCHEDULE_STORE = Symbol('pg-queue:maintenance_schedule_store');

/** Options after validation and defaults (see utils/resolve-options.ts). */
export const RESOLVED_OPTIONS = Symbol('pg-queue:resolved_options');
