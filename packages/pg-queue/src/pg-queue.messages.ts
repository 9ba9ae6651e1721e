// Error and log texts, as small factories so that tests and code share one wording.

export const DUPLICATE_HANDLER = (queue: string, first: string, second: string) =>
  `Queue "${queue}" has two @JobHandler methods (${first} and ${second}); a queue has exactly one handler.`;

export const REQUEST_SCOPED_HANDLER = (where: string) =>
  `@JobHandler ${where} is on a request-scoped (or transient) provider; job handlers need a singleton provider, since no request exists when a job runs.`;

export const INVALID_QUEUE_NAME = (queue: unknown) =>
  `Invalid queue name ${JSON.stringify(queue)}: use 1 to 128 characters from A-Z a-z 0-9 _ . : -`;

export const INVALID_OPTION = (where: string, name: string, value: unknown, expected: string) =>
  `Invalid ${where} option ${name}=${describe(value)}: expected ${expected}.`;

export const LIMIT_WITH_PREFETCH = (where: string) =>
  `${where} sets prefetch with a limit across instances (globalConcurrency, rateLimit, concurrencyPerKey): a prefetched job would hold a slot, or use up a start, while it waits in this process. Set prefetch to 0.`;

export const NO_DATA_SOURCE = () =>
  'PgQueueModule needs a database: pass `dataSource` (a TypeORM DataSource), `connection` (a URL or PostgreSQL connection options), or import TypeOrmModule.forRoot() (optionally naming it with `dataSourceName`).';

export const NOT_POSTGRES = (type: unknown) =>
  `PgQueueModule needs a PostgreSQL DataSource, got type ${describe(type)}.`;

export const POOLER_REFUSED_PREPARED_STATEMENT = (detail: string) =>
  `PostgreSQL said "${detail}": the queue's connection goes through a transaction pooler (PgBouncer in transaction mode?), where named prepared statements fail. Set \`transactionPooler: true\` in the PgQueueModule options (and \`listenerUrl\` to a direct PostgreSQL URL for LISTEN).`;

export const POOLER_REFUSED_STARTUP_PARAMETER = (detail: string) =>
  `The connection pooler said "${detail}" to the queue's statement_timeout. Behind PgBouncer in transaction mode set \`transactionPooler: true\` in the PgQueueModule options; in session mode set \`statementTimeoutMs: 0\` or list statement_timeout and idle_in_transaction_session_timeout in PgBouncer's ignore_startup_parameters.`;

export const LISTEN_THROUGH_POOLER = () =>
  'transactionPooler is set but listenerUrl is not: LISTEN through a transaction pooler connects but hears nothing, so workers wake only on their poll (pollIntervalMs). Set listenerUrl to a direct PostgreSQL URL.';

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

export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'function') return `[function ${value.name || 'anonymous'}]`;
  if (typeof value === 'bigint') return `${value}n`;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

export const BAD_RETRY_DELAY = (queue: string, what: string, usedMs: number) =>
  `backoff of queue "${queue}" ${what}; the retry waits ${usedMs} ms instead (a delay must be a finite number of ms from 0 to ${MAX_RETRY_DELAY_MS})`;

export const OUTCOME_UNWRITABLE = (jobId: string, queue: string, kind: string, tries: number, error: string) =>
  `job ${jobId} (${queue}): its ${kind} was refused by the database ${tries} times (${error}); giving up on it: its lease will lapse and the sweeper puts the job back`;

/** The longest retry delay a backoff may ask for (365 days); longer or non-finite delays are clamped to it. */
export const MAX_RETRY_DELAY_MS = 365 * 86_400_000;
