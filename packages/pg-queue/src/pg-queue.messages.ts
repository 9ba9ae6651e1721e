import { inspect } from 'node:util';
import { DEFAULT_DATABASE } from './pg-queue.constants.js';

// Error and log texts, as small factories so that tests and code share one wording.

export const DUPLICATE_HANDLER = (queue: string, first: string, second: string) =>
  `Queue "${queue}" has two @JobHandler methods (${first} and ${second}); a queue has exactly one handler.`;

export const INVALID_QUEUE_NAME = (queue: unknown) =>
  `Invalid queue name ${JSON.stringify(queue)}: use 1 to 128 characters from A-Z a-z 0-9 _ . : -`;

export const INVALID_OPTION = (where: string, name: string, value: unknown, expected: string) =>
  `Invalid ${where} option ${name}=${describe(value)}: expected ${expected}.`;

export const LIMIT_WITH_PREFETCH = (where: string) =>
  `${where} sets prefetch with a limit across instances (globalConcurrency, rateLimit, concurrencyPerKey): a prefetched job would hold a slot, or use up a start, while it waits in this process. Set prefetch to 0, or leave it unset (such queues never read ahead).`;

export const HELD_JOBS_GIVEN_BACK = (queue: string, n: number, why: string) =>
  `queue "${queue}": ${n} job(s) read ahead and not started were put back for other instances (${why})`;

export const STALE_CLAIM = (queue: string, n: number, tookMs: number, leaseMs: number) =>
  `queue "${queue}": a claim came back ${tookMs} ms after it was sent (this process stalled: frozen, or its event loop blocked), more than half the ${leaseMs} ms lease; its ${n} job(s) go back to the queue unstarted, since another instance may have taken them meanwhile`;

export const LATE_STARTS = (queue: string, n: number, sinceClaimMs: number, leaseMs: number) =>
  `queue "${queue}": ${n} job(s) of a claim were still unstarted ${sinceClaimMs} ms after it was sent (this process stalled while starting them: a handler's synchronous work, frozen, or its event loop blocked), more than half the ${leaseMs} ms lease; they go back to the queue unstarted, since another instance may have taken them meanwhile`;

export const HELD_JOBS_NOT_GIVEN_BACK = (queue: string, n: number, error: string) =>
  `queue "${queue}": could not put back ${n} job(s) read ahead and not started (${error}); they return to the queue, uncharged, when their short leases lapse`;

export const WORKER_DEFECT = (queue: string, what: string, error: string) =>
  `queue "${queue}": a defect of the worker while ${what}: ${error}; the worker goes on (please report it)`;

export const OPTIONAL_PEER_MISSING = (pkg: string, what: string, range: string) =>
  `${what} needs the package "${pkg}", which is not installed: run \`npm install ${pkg}@"${range}"\` (it is an optional peer dependency of nestjs-pg-queue).`;

export const NOT_A_TRANSACTION = (where: string, value: unknown) =>
  `${where}: manager (${value !== null && typeof value === 'object' ? `an object of class ${value.constructor?.name || 'Object'}` : describe(value)}) is not a transaction the queue can join; pass a TypeORM EntityManager, a pg Client or PoolClient (after BEGIN), a Prisma interactive transaction's client, a Kysely Transaction, a Drizzle transaction or a MikroORM EntityManager.`;

export const POOL_IS_NOT_A_TRANSACTION = (where: string) =>
  `${where}: manager is a pg Pool, which runs each statement on whichever connection is free and so holds no transaction; pass the PoolClient on which you ran BEGIN (const client = await pool.connect()).`;

export const AMBIENT_HOST_MISSING = (connectionName: string | undefined) =>
  `PgQueueModule (option ambientTransactions): no TransactionHost${connectionName === undefined ? '' : ` for connectionName "${connectionName}"`} in this app; register the plugin, e.g. ClsModule.forRoot({ plugins: [new ClsPluginTransactional({${connectionName === undefined ? '' : ` connectionName: '${connectionName}',`} imports: [...], adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource }) })] }).`;

export const INSTANCE_DEREGISTER_FAILED = (id: string, error: string) =>
  `could not delete this instance's row (${id}) from background_instances at shutdown (${error}); it reads as gone once it expires`;

export const NO_DATA_SOURCE = () =>
  'PgQueueModule needs a database: pass `dataSource` (a TypeORM DataSource), `connection` (a URL or PostgreSQL connection options), or import TypeOrmModule.forRoot() (optionally naming it with `dataSourceName`).';

export const NOT_POSTGRES = (type: unknown) =>
  `PgQueueModule needs a PostgreSQL DataSource, got type ${describe(type)}.`;

/** The guide to distributed PostgreSQL-compatible engines, linked from the boot check's messages. */
export const DISTRIBUTED_POSTGRES_GUIDE = 'https://github.com/nestjs-pg-queue/nestjs-pg-queue/blob/main/docs/guides/distributed-postgres.md';

export const NOT_POSTGRESQL_SERVER = (engine: string, reported: string) =>
  `PgQueueModule needs PostgreSQL, and this server is ${engine} (version(): ${describe(reported.length > 160 ? `${reported.slice(0, 160)}...` : reported)}). The queue relies on PostgreSQL's row locks (FOR UPDATE SKIP LOCKED), LISTEN/NOTIFY, advisory locks, sequences, declarative partitions, transaction ids and PL/pgSQL triggers, which ${engine} lacks or implements differently: refused at boot rather than failing later, in a migration or a claim. What each engine supports and what the queue would have to change for it: ${DISTRIBUTED_POSTGRES_GUIDE}`;

export const CITUS_INSTALLED = (version: string) =>
  `the citus extension (${version}) is installed: the queue's tables are plain local tables on this node, as they must stay (distributing them with create_distributed_table would break the claim's FOR UPDATE SKIP LOCKED across shards). See ${DISTRIBUTED_POSTGRES_GUIDE}`;

export const SERVER_UNASKED = (error: string) =>
  `could not ask the database server what it is at boot (${error}); the queue starts without that check, since migrationsRun is off and it needs no database to start (its loops wait out an outage). It refuses engines that are not PostgreSQL: ${DISTRIBUTED_POSTGRES_GUIDE}`;

export const SERVER_ADDITIONS_UNREAD = (error: string) =>
  `could not read which engine this PostgreSQL server is built into (${error}); carrying on as PostgreSQL. See ${DISTRIBUTED_POSTGRES_GUIDE}`;

export const POOLER_REFUSED_PREPARED_STATEMENT = (detail: string) =>
  `PostgreSQL said "${detail}": the queue's connection goes through a transaction pooler (PgBouncer in transaction mode?), where named prepared statements fail. Set \`transactionPooler: true\` in the PgQueueModule options (and \`listenerUrl\` to a direct PostgreSQL URL for LISTEN).`;

export const POOLER_REFUSED_STARTUP_PARAMETER = (detail: string) =>
  `The connection pooler said "${detail}" to the queue's statement_timeout. Behind PgBouncer in transaction mode set \`transactionPooler: true\` in the PgQueueModule options; in session mode set \`statementTimeoutMs: 0\` or list statement_timeout and idle_in_transaction_session_timeout in PgBouncer's ignore_startup_parameters.`;

export const POOLER_WITHOUT_LISTENER_URL = () =>
  'Invalid PgQueueModule options: transactionPooler is true but listenerUrl is not set. Set listenerUrl to a direct (session) PostgreSQL URL: LISTEN through a transaction pooler connects but hears nothing, and migrations that run outside a transaction (CREATE INDEX CONCURRENTLY) hold a session advisory lock there.';

export const POOL_EXHAUSTED = (poolSize: number, connectTimeoutMs: number, option = 'poolSize') =>
  `No connection of the queue's ${POOL_OF_OPTION[option] ?? ''}pool came free within connectTimeoutMs (${connectTimeoutMs} ms); all ${option} (${poolSize}) connections were busy, or the database did not answer. Raise ${option} or connectTimeoutMs, or look for long-running queue statements${option === 'poolSize' ? ' (or for enqueues waiting on a uniqueKey your transactions hold)' : ''}.`;

const POOL_OF_OPTION: Record<string, string> = { poolSize: 'API ', leasePoolSize: 'leases ', maintenancePoolSize: 'maintenance ' };

export const UNSCHEDULED_APP_METHODS = (methods: string[]) =>
  `${methods.join(', ')} ${methods.length === 1 ? 'has' : 'have'} @Cron/@Interval/@Timeout metadata, but the app imports no ScheduleModule.forRoot(), so ${methods.length === 1 ? 'it does' : 'they do'} not run (PgQueueModule no longer imports it for the app). Import ScheduleModule.forRoot() in the app module.`;

export const PAYLOAD_NOT_JSON = (queue: string, detail: string) =>
  `Cannot enqueue to "${queue}": the payload is not JSON-serialisable (${detail}).`;

export const PAYLOAD_TOO_LARGE = (queue: string, bytes: number, limit: number) =>
  `Cannot enqueue to "${queue}": the payload is ${bytes} bytes as JSON, over the maxPayloadBytes limit of ${limit}.`;

export const INDEX_NAME_TAKEN = (name: string) =>
  `Cannot create index ${name}: another relation of that name exists in the schema; rename or drop it, then restart.`;

export const LOOP_FAILED = (what: string, error: string, retryMs: number) =>
  `${what} failed: ${error}; retrying with backoff (next try in ${retryMs} ms, further failures are not logged until it recovers)`;

export const LOOP_RECOVERED = (what: string, failures: number, downMs: number) =>
  `${what} recovered after ${failures} failed attempt(s) over ${downMs} ms`;

/** The `what` of the wake sender's outage (LOOP_FAILED / LOOP_RECOVERED): the queues whose jobs wait for it. */
export const WAKE_UP_FAILED = (queues: string[]) =>
  `the wake-up (NOTIFY) after enqueue of queue(s) ${queues.map((q) => JSON.stringify(q)).join(', ')} (the jobs are stored; until it goes through, workers find them at their next poll)`;

export const WAKE_CONNECTION_LOST = (error: string) =>
  `the wake-up connection (NOTIFY after enqueue) was lost: ${error}; the next wake-up connects again (until it can, wake-ups go out on the queue's pool)`;

/** The `what` of a wake-up connection that cannot be dialled (LOOP_FAILED / LOOP_RECOVERED). */
export const WAKE_CONNECTION_DIAL = "dialling the wake-up connection (NOTIFY after enqueue; until it is back, wake-ups go out on the queue's pool)";

export const WAKE_UPS_DROPPED = (queues: string[], error: string) =>
  `at shutdown, the wake-up (NOTIFY) of queue(s) ${queues.map((q) => JSON.stringify(q)).join(', ')} could not be sent: ${error}; their jobs are stored, and workers find them at their next poll`;

/**
 * A value in a message: JSON where it has some, else its String(). Never throws: it also describes what a
 * custom backoff returned, while a job's failure is settled (a revoked Proxy, a throwing toJSON or toString).
 */
export function describe(value: unknown): string {
  try {
    if (typeof value === 'string') return JSON.stringify(value);
    if (typeof value === 'function') return `[function ${value.name || 'anonymous'}]`;
    if (typeof value === 'bigint') return `${value}n`;
    try {
      return JSON.stringify(value) ?? String(value);
    } catch {
      return String(value);
    }
  } catch {
    try {
      return inspect(value, { depth: 2, breakLength: Infinity, customInspect: false });
    } catch {
      return `[${typeof value}]`;
    }
  }
}

export const BAD_RETRY_DELAY = (queue: string, what: string, usedMs: number) =>
  `backoff of queue "${queue}" ${what}; the retry waits ${usedMs} ms instead (a delay must be a finite number of ms from 0 to ${MAX_RETRY_DELAY_MS})`;

export const OUTCOME_UNWRITABLE = (jobId: string, queue: string, kind: string, tries: number, error: string) =>
  `job ${jobId} (${queue}): its ${kind} was refused by the database ${tries} times (${error}); giving up on it: its lease will lapse and the sweeper puts the job back`;

/** The longest retry delay a backoff may ask for (365 days); longer or non-finite delays are clamped to it. */
export const MAX_RETRY_DELAY_MS = 365 * 86_400_000;

export const UNIQUE_HOLDER_UNSEEN = (rounds: number) =>
  `enqueue with a unique key: the key's holder changed under ${rounds} tries in a row (jobs of that key are being enqueued and finished faster than one enqueue can read the holder); these rows were not stored (other rows of the call may have been), try again`;

export const SPAWN_DUPLICATES = (jobId: string, queue: string, refs: readonly string[]) =>
  `job ${jobId} (${queue}) completed, but its spawned job(s) ${refs.map((r) => JSON.stringify(r)).join(', ')} were not created: another job took their uniqueKey after job.spawn() checked it (duplicates; the jobs of the spawn that depended on them did not wait for them)`;

/** retry() of a flow job one of whose parents has not completed (it failed or was cancelled because of that parent). */
export const RETRY_PARENT_NOT_COMPLETED = (id: string, parentId: string, parentRef: string | null, parentStatus: string) =>
  `Cannot retry job ${id}: its parent job ${parentId} (${parentRef ?? '?'}) is ${parentStatus}, not completed; retry the parent: the jobs of its flow that failed or were cancelled because of it come back with it, blocked until it completes.`;

/** retry() of a flow job one of whose parents is gone (pruned or deleted): it could not read its parent's result. */
export const RETRY_PARENT_GONE = (id: string, parentId: string) =>
  `Cannot retry job ${id}: its parent job ${parentId} no longer exists (pruned past retention, or deleted), and with it the result the job would read; enqueue the work again as a new flow.`;

export const UNIQUE_KEY_RETRY_TAKEN = (id: string) =>
  `Cannot retry job ${id}: another queued or running job holds its unique key; cancel that job first or wait for it to finish.`;

export const BAD_SNOOZE_DELAY = (queue: string, jobId: string, value: unknown, usedMs: number) =>
  `job ${jobId} (${queue}) snoozed with delayMs=${describe(value)}; it waits ${usedMs} ms instead (a delay must be a finite number of ms from 0 to ${MAX_RETRY_DELAY_MS})`;

export const BAD_RATE_LIMITED_DELAY = (queue: string, jobId: string, value: unknown, usedMs: number) =>
  `job ${jobId} (${queue}) threw RateLimitedError with delayMs=${describe(value)}; the block lasts ${usedMs} ms instead (a delay must be a finite number of ms from 1 to 86400000)`;

// Limits changed at runtime and a partner's 429 (worker/queue-limits-keeper.ts).
export const LIMITS_APPLIED = (queue: string, what: string) => `queue "${queue}": limits now ${what} (read from the database)`;
export const LIMITED_NOT_MARKED = (queue: string, n: number, error: string) =>
  `queue "${queue}": ${n} running job(s) could not be marked as counted by the new limits (${error}); the limits count them only once they end`;
export const RATE_LIMITED_BLOCK = (queue: string, key: string | undefined, ms: number) =>
  `queue "${queue}"${key === undefined ? '' : ` key ${JSON.stringify(key)}`}: rate limited by the partner, no job starts for ${Math.round(ms)} ms in any process`;

// Recurring jobs.

export const INVALID_SCHEDULE = (where: string, detail: string) => `${where}: ${detail}`;

export const DUPLICATE_SCHEDULE = (name: string, first: string, second: string) =>
  `Two @RecurringJob methods (${first} and ${second}) declare the schedule "${name}"; give each its own { name }.`;

export const RECURRING_QUEUE_MISMATCH = (where: string, handlerQueue: string, scheduleQueue: string) =>
  `@RecurringJob on ${where} says queue "${scheduleQueue}" but its @JobHandler handles "${handlerQueue}"; the schedule fires into the method's queue: drop one of them.`;

export const RECURRING_HANDLER_OPTIONS_TWICE = (where: string, keys: string[]) =>
  `@RecurringJob on ${where} has handler options (${keys.join(', ')}) and the method also has @JobHandler: give handler options on @JobHandler only.`;

export const MISSED_FIRES_SKIPPED = (name: string, fromIso: string, throughIso: string, policy: string) =>
  `schedule "${name}": fires from ${fromIso} through ${throughIso} were missed (no instance was ticking) and are skipped under missedFires ${policy}`;

export const SCHEDULE_ENDED = (name: string, why: string, fires: number) =>
  `recurring jobs: schedule "${name}" fires no more: ${why} (${fires} fire(s) in all); schedules() shows it ended (upsertSchedule with a higher limit or a later endDate brings it back)`;

export const SCHEDULE_NOT_FOUND = (name: string) => `No schedule named ${JSON.stringify(name)}.`;

// Results, progress, waiting, events.

export const RESULT_NOT_JSON = (queue: string, jobId: string, detail: string) =>
  `job ${jobId} (${queue}): the handler's result cannot be stored: it is not JSON (${detail}); the job fails without a retry (a retry would return the same). Return a JSON value, or nothing.`;

export const RESULT_TOO_LARGE = (queue: string, jobId: string, bytes: number, limit: number) =>
  `job ${jobId} (${queue}): the handler's result is ${bytes} bytes as JSON, over the maxResultBytes limit of ${limit}; the job fails without a retry (a retry would return the same). Store large output elsewhere and return a reference, or raise maxResultBytes.`;

export const PROGRESS_NOT_JSON = (jobId: string, detail: string) =>
  `job.progress() of job ${jobId}: the value is not JSON (${detail}); pass a number or a small JSON value.`;

export const PROGRESS_TOO_LARGE = (jobId: string, bytes: number, limit: number) =>
  `job.progress() of job ${jobId}: the value is ${bytes} bytes as JSON, over the limit of ${limit}; progress is for a number or a small object.`;

export const WAIT_JOB_NOT_FOUND = (jobId: string) => `waitFor(${jobId}): no such job (never enqueued, pruned past its retention, or deleted as it completed: with completedRetentionMs 0 only the jobs awaited before they finished keep their row).`;

export const WAIT_JOB_GONE = (jobId: string) =>
  `waitFor(${jobId}): the job's row is gone (deleted, or pruned past its retention) before it could be seen finished.`;

export const WAIT_SHUTTING_DOWN = (jobId: string) => `waitFor(${jobId}): the application is shutting down; stopped waiting.`;

export const UNKNOWN_JOB_EVENT = (where: string, name: unknown, known: readonly string[]) =>
  `@OnJobEvent on ${where}: unknown event ${describe(name)}; known events: ${known.join(', ')}.`;

export const ON_JOB_EVENT_REQUEST_SCOPED = (where: string) =>
  `@OnJobEvent ${where} is on a request-scoped (or transient) provider; event listeners need a singleton provider (they are called for every job, outside any request).`;

export const ON_JOB_EVENT_NO_HANDLER = (where: string, queue: string, workers: boolean) =>
  workers
    ? `@OnJobEvent ${where} listens to queue "${queue}", but no @JobHandler of this app handles it: events come from this instance's workers only, so it will never be called here.`
    : `@OnJobEvent ${where} listens to queue "${queue}", but this instance runs no workers (workers: false): events come from this instance's workers only, so it will never be called here.`;
// Typed queues and payload validation.

export const PAYLOAD_REFUSED = (where: string, queue: string, reason: string) =>
  `${where}: the payload was refused by the validator of queue "${queue}": ${reason}. Nothing was enqueued.`;

export const VALIDATOR_SAID_NO = 'the validator returned false';

export const PAYLOAD_REFUSED_AT_START = (queue: string, id: string, reason: string) =>
  `job ${id}: the payload was refused by the validator of queue "${queue}": ${reason}. The handler did not run; the job fails without retries (each would bring the same payload).`;

export const QUEUE_DEFINED_TWICE = (queue: string) =>
  `defineQueue("${queue}"): the queue is already defined with another validator; define each queue once (export the definition and import it where needed), so that every enqueue to it is checked by the same validator.`;

export const INVALID_QUEUE_DEFINITION = (queue: string, detail: string) => `defineQueue("${queue}"): ${detail}`;

export const MIGRATION_LOCK_WAIT = (migration: string, waitedMs: number, holders: string, retryInMs: number, attempt: number) =>
  `queue migration ${migration} waited ${waitedMs} ms for a lock on the queue's tables and gave up, so that the statements queued behind it go on; ` +
  `the lock is held by ${holders || 'a transaction that has ended since'}; trying again in ${retryInMs} ms (attempt ${attempt})`;

export const STEP_RESULT_NOT_JSON = (queue: string, jobId: string, step: string, detail: string) =>
  `job ${jobId} (${queue}): step "${step}" returned a result that cannot be stored: it is not JSON (${detail}); the job fails without a retry (a retry would return the same). Return a JSON value, or nothing.`;

export const STEP_RESULT_TOO_LARGE = (queue: string, jobId: string, step: string, bytes: number, limit: number) =>
  `job ${jobId} (${queue}): step "${step}" returned ${bytes} bytes as JSON, over the maxResultBytes limit of ${limit}; the job fails without a retry (a retry would return the same). Store large output elsewhere and return a reference, or raise maxResultBytes.`;

export const STEP_NOT_RECORDED = (queue: string, jobId: string, step: string) =>
  `job ${jobId} (${queue}): step "${step}" ran but was not recorded: this attempt no longer holds the job (its lease was lost, or it was cancelled or swept); the attempt's outcome will be discarded and the attempt that holds the job now runs the step again`;

export const TRANSACTIONAL_WITHOUT_DATA_SOURCE = (queue: string, handler: string, database: string) => {
  const module = database === DEFAULT_DATABASE ? 'PgQueueModule' : `PgQueueModule "${database}"`;
  return `${handler} (queue "${queue}" of ${module}): transactional: true runs the handler and the job's completion in one transaction of a TypeORM DataSource on the queue's own database, and this module has none: it was given \`connection\` only. The app's TypeORM DataSource is not used in its place: it may be another database, where the completion would never land (or would complete another database's job). In ${module}'s forRoot options, replace \`connection\` with \`dataSource\` (a TypeORM DataSource on this database) or \`dataSourceName\` (the name of TypeOrmModule's DataSource on it), or make the handler non-transactional.`;
};

// Several databases (databases/queue-databases.ts).
export const DATABASE_TWICE = (name: string) =>
  name === DEFAULT_DATABASE
    ? 'PgQueueModule is imported twice without a name: give every PgQueueModule but one a `name` (its database), next to its options.'
    : `Two PgQueueModule imports are named "${name}": each database's module needs a name of its own.`;

export const NAMED_WITHOUT_QUEUES = (name: string) =>
  `PgQueueModule "${name}" lists no queues: a named database owns the queues its \`queues\` option names (e.g. queues: { 'reports.build': {} }), and every other queue belongs to the module without a name.`;

export const QUEUE_IN_TWO_DATABASES = (queue: string, one: string, other: string) =>
  `Queue "${queue}" is listed by PgQueueModule "${[one, other].sort()[0]}" and by "${[one, other].sort()[1]}": a queue lives in one database; list it in one module's \`queues\`.`;

export const NO_DATABASE_FOR_QUEUE = (queue: string, names: string[]) =>
  `Queue "${queue}" belongs to no database: it is not listed in the \`queues\` of PgQueueModule ${names.map((n) => `"${n}"`).join(', ')}, and no PgQueueModule without a name takes the other queues.`;

export const UNKNOWN_DATABASE = (name: string, names: string[]) => `No PgQueueModule is named "${name}"; the app's are ${names.map((n) => `"${n}"`).join(', ')}.`;

export const INVALID_DATABASE_NAME = (name: unknown) =>
  `Invalid PgQueueModule name ${JSON.stringify(name)}: use 1 to 64 characters from A-Z a-z 0-9 _ . -`;

export const MANAGER_OF_ANOTHER_DATABASE = (method: string, queue: string, database: string, managerDb: string, queueDb: string) =>
  `${method}("${queue}"): the manager's transaction is on database ${managerDb}, but queue "${queue}" lives in PgQueueModule "${database}" (${queueDb}). A job joins a transaction only on its own queue's database: pass a manager of that database, or enqueue after your transaction commits.`;

export const JOBS_OF_SEVERAL_DATABASES = (method: string, owners: ReadonlyMap<string, string>) =>
  `${method}: its jobs live in ${owners.size} databases (${[...owners].map(([db, queue]) => `"${queue}" in "${db}"`).join(', ')}); one call adds jobs to one database, in one statement: call once per database.`;
