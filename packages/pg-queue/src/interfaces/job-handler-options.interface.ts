/**
 * Retry delay in ms after a failed attempt: a function of the attempt that failed (1-based) and its error. A
 * finite number from 0 to 365 days; anything else (NaN, negative, Infinity, not a number, a throw) is logged
 * and clamped into that range.
 */
export type BackoffFunction = (attempt: number, error: unknown) => number;

export interface ExponentialBackoff {
  /** Delay after the first failure is baseMs * 2. Default 10_000 (the seed's 10 s x 2^attempts). */
  baseMs?: number;
  /** Upper bound of one delay. Default 1 day. */
  maxMs?: number;
  /** Randomise each delay within +/-25% so that failures of one burst do not retry in lockstep. Default true. */
  jitter?: boolean;
}

export interface JobHandlerOptions {
  /** Jobs of this queue run at once in this process. Default 10. */
  concurrency?: number;
  /** Attempts before a job is dead-lettered (status failed). Stored on the row at enqueue. Default 5. */
  maxAttempts?: number;
  /** Default: exponential, 10 s x 2^attempt with jitter. */
  backoff?: ExponentialBackoff | BackoffFunction;
  /** Abort `job.signal` and fail the attempt after this long. Default: no timeout. */
  timeoutMs?: number;
  /**
   * Jobs claimed ahead of free slots and kept in a local buffer (their leases renewed meanwhile), so that one
   * claim brings a whole batch.
   *
   * `'auto'` (the default) sizes the buffer from what the worker measures: the handler's duration and the
   * claim's round trip (moving averages). It holds what the slots finish in about two claim round trips, at
   * most `500 - concurrency`: hundreds for jobs of microseconds (one claim per few hundred jobs), none for
   * jobs of 50 ms and more (each instance claims only for its free slots, and long jobs spread evenly over
   * instances). Nothing is read ahead before the first job has finished; from there the buffer at most
   * doubles per claim, and jobs that turn out slower than the buffer was sized for are put back for other
   * instances. A number fixes the buffer at that size (0: claim only for free slots). Queues with a limit
   * across instances (`globalConcurrency`, `rateLimit`, `concurrencyPerKey`) never read ahead.
   */
  prefetch?: number | 'auto';
  /**
   * Runs the handler inside a transaction of the app's TypeORM DataSource, hands it the transaction's
   * EntityManager (`job.manager`, typed by `TransactionalJob`), and writes the job's completion in that same
   * transaction, fenced by the lease: the handler's writes and the completion commit together or not at all, so
   * work whose effects are rows of this database happens exactly once. A failure rolls the handler's writes back
   * and is recorded outside the transaction. It holds one connection of the app's pool for the handler's whole run:
   * `timeoutMs` defaults to 60 s here. Default false. See docs/guides/transactional-handlers.md.
   */
  transactional?: boolean;
  /**
   * A batch handler: the method receives `BatchJob[]`, up to `size` jobs per call, and `concurrency` counts calls
   * (batches), not jobs. `waitMs`: when the queue had fewer due jobs than a full batch, how long the worker lets
   * more arrive before it claims (0, the default: whatever is due now). Resolving completes every job of the batch;
   * throwing fails each (its own attempt, backoff, dead letter); `job.complete(result)`, `job.fail(error)` and
   * `job.snooze(ms)` settle a job on its own, whatever the batch does. No read-ahead (`prefetch`, `batchSize`) and
   * not `transactional`. See docs/guides/batch-handlers.md.
   */
  batch?: BatchOptions;
  /**
   * The most jobs one claim takes. Default: with `prefetch: 'auto'`, 500 (each claim takes what the free
   * slots and the read-ahead have room for); with a number, concurrency + prefetch, at most 100.
   */
  batchSize?: number;
  /**
   * Jobs of this queue running at once in all processes together (`concurrency` still caps each process).
   * Enforced by the claim, under a per-queue advisory lock. Default: no limit. See README, "Limits".
   */
  globalConcurrency?: number;
  /** Jobs of this queue started (claimed) per sliding window of `intervalMs`, in all processes together. Default: no limit. */
  rateLimit?: RateLimit;
  /**
   * Jobs of one concurrency key (`enqueue(..., { concurrencyKey })`) running at once in all processes
   * together; 1 runs each key's jobs one at a time, in run_at order. Keys take turns. Default: no limit.
   */
  concurrencyPerKey?: number;
  /**
   * Weighted fair share across the jobs' keys (tenants, accounts): the queue's starts go to the keys that have due
   * jobs in proportion to their weights, in every process together (stride scheduling in the claim), so a key with
   * 100,000 jobs queued cannot hold back a key with 10; a key alone with work gets every slot. `true`: every
   * key weighs 1. Jobs are keyed by `concurrencyKey` (or `fairness.key` at enqueue). Works with the other limits
   * (claims take turns under the queue's lock, no read-ahead). Weights can change at runtime
   * (`QueueService.setFairnessWeights`, `pg-queue weights`). See docs/guides/fair-share.md.
   */
  fairness?: true | FairnessOptions;
  /**
   * A job enqueued in this process (`enqueue()` without a `manager` or ambient transaction, due now, without
   * `uniqueKey` or `concurrencyKey`) while this queue's worker here has a free slot and nothing read ahead is
   * inserted already claimed by it, and starts as soon as its insert commits: one statement and one WAL flush
   * instead of the insert, its NOTIFY and a claim of its own (about half the start latency of the app and the
   * worker in one process; docs/performance.md). The insert claims it only where a claim would have: the queue
   * not paused, and no due job of its priority or higher waiting before it; otherwise it is queued as usual. The
   * job is then an ordinary claimed job (lease, heartbeat, cancel, retries, fencing). Never on a queue with
   * limits across instances or of batches. Default true.
   */
  eagerStart?: boolean;
  /**
   * A handler that throws `RateLimitedError(ms)` (a partner answered 429) blocks the queue (or the error's key) for
   * `ms` in every process. 429s that come again without a success in between double the block, up to `maxMs`
   * (never below the `ms` the handler asked). Default `{ maxMs: 300_000 }`. See README, "Limits changed at runtime".
   */
  rateLimitedBackoff?: { maxMs: number };
  /**
   * Last in, first out: within each priority, the job due last starts first (for jobs enqueued to run at once, the
   * newest), whatever the jobs were enqueued with. The same claim index walked backwards: it costs nothing more than
   * FIFO. Jobs can also ask for it one by one (`enqueue(..., { lifo: true })`). Where it does not hold exactly
   * (read-ahead, keys): README, "LIFO". Default false.
   */
  lifo?: boolean;
  /**
   * Runs the queue's jobs in a pool of `node:worker_threads` Workers instead of on the event loop, for handlers that
   * compute for seconds: `file` (an absolute path or a file: URL) exports the function that processes a job
   * (`export default async function (job: ThreadJob) { ... }`); the decorated method is not called. The main thread
   * keeps the lease, heartbeat, timeout, cancel and progress, and writes the outcome. `concurrency` defaults to
   * `poolSize` and may not exceed it. Not with `transactional` or `batch`. See docs/guides/cpu-heavy-handlers.md.
   */
  thread?: ThreadOptions;
  /**
   * Records the queue's job state changes in the event stream (`QueueService.events()`, README: "Event stream"): each
   * process that declares it turns recording on at boot (as `recordEvents(queue)` does, for every process; a boot that
   * finds it on changes nothing). Leaving the option out turns nothing off: `recordEvents(queue, false)` does.
   * Default false.
   */
  recordEvents?: boolean;
}

export interface ThreadOptions {
  /** The module the threads load: an absolute path or a file: URL of a JavaScript (ESM or CommonJS) file. */
  file: string | URL;
  /** Threads at most, 1 to 64, started as jobs need them. Default: the machine's cores minus one (at least 1). */
  poolSize?: number;
  /** After an abort (timeout, cancel, lost lease, shutdown), how long the thread may run on before it is terminated and replaced, 0 to 60000 ms. Default 1000. */
  abortGraceMs?: number;
  /** Each thread's memory limits (node:worker_threads ResourceLimits): a thread past them fails its job and is replaced. */
  resourceLimits?: ThreadResourceLimits;
}

export interface ThreadResourceLimits {
  maxOldGenerationSizeMb?: number;
  maxYoungGenerationSizeMb?: number;
  codeRangeSizeMb?: number;
  stackSizeMb?: number;
}

/** `thread` after validation. */
export interface ResolvedThreadOptions {
  /** The file's URL (file://...), as the threads import it. */
  fileUrl: string;
  poolSize: number;
  abortGraceMs: number;
  resourceLimits: ThreadResourceLimits | undefined;
}

export interface FairnessOptions {
  /** Weights of keys, integers from 1 to 1000 (a key of weight 3 gets three times the starts of one of weight 1). */
  weights?: Record<string, number>;
  /** The weight of a key without one here or stored at runtime. Default 1. */
  defaultWeight?: number;
  /**
   * The key of a job enqueued without `concurrencyKey`, from its payload (a tenant id). Applied by enqueues in
   * processes that know this queue's options (its handler, or the module's `queues`); elsewhere pass
   * `concurrencyKey`. Default: the job's `concurrencyKey` only (jobs without one share one key).
   */
  key?: (payload: any) => string; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export interface BatchOptions {
  /** The most jobs per call, 1 to 1000. */
  size: number;
  /** How long to let a batch fill when fewer jobs were due than `size`, 0 to 60000 ms. Default 0. */
  waitMs?: number;
}

export interface RateLimit {
  /** Starts allowed in any window of intervalMs. */
  max: number;
  intervalMs: number;
}

/** Options after defaults, as the worker uses them. */
export interface ResolvedHandlerOptions {
  concurrency: number;
  maxAttempts: number;
  backoff: BackoffFunction;
  timeoutMs: number | undefined;
  /** 'auto' only on queues without limits across instances. */
  prefetch: number | 'auto';
  batchSize: number;
  globalConcurrency: number | undefined;
  rateLimit: RateLimit | undefined;
  concurrencyPerKey: number | undefined;
  /** Set when the queue shares its slots fairly across keys. */
  fairness: ResolvedFairness | undefined;
  transactional: boolean;
  /** Set for a batch handler. */
  batch: { size: number; waitMs: number } | undefined;
  /** Off on queues with limits and batch handlers, whatever was asked. */
  eagerStart: boolean;
  /** The longest block repeated 429s grow to (RateLimitedError). */
  rateLimitedBackoff: { maxMs: number };
  /** Claims take the newest due job first within each priority (or key). */
  lifo: boolean;
  /** Set for a thread handler (`thread`). */
  thread?: ResolvedThreadOptions;
  /** Turns the queue's event recording on at boot. */
  recordEvents: boolean;
}

export interface ResolvedFairness {
  weights: Record<string, number>;
  defaultWeight: number;
  key: ((payload: unknown) => string) | undefined;
}
