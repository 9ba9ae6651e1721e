import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { JobHandlerOptions, ResolvedFairness, ResolvedHandlerOptions } from '../interfaces/job-handler-options.interface.js';
import type { PgQueueMaintenanceOptions, PgQueueModuleOptions } from '../interfaces/pg-queue-options.interface.js';
import { HISTORY_PARTITION_WIDTHS, type HistoryPartitionWidth } from '../store/history.sql.js';
import { INVALID_DATABASE_NAME, INVALID_OPTION, INVALID_QUEUE_NAME, LIMIT_WITH_PREFETCH, POOLER_WITHOUT_LISTENER_URL } from '../pg-queue.messages.js';
import { AUTO_MAX_IN_HAND, DATABASE_NAME_PATTERN, QUEUE_NAME_PATTERN } from '../pg-queue.constants.js';
import { exponentialBackoff } from './backoff.js';
import { resolveThreadOptions } from './resolve-thread-options.js';

/** Module options with every default filled in; validated once, at boot. */
export interface ResolvedModuleOptions {
  workers: boolean;
  migrationsRun: boolean;
  workerId: string;
  leaseMs: number;
  heartbeatMs: number;
  pollIntervalMs: number;
  fallbackPollIntervalMs: number;
  shutdownGraceMs: number;
  maxPayloadBytes: number;
  maxResultBytes: number;
  listenerUrl: string | undefined;
  /** The API pool's size (statements of the app's calls). */
  poolSize: number;
  /** The workers' pool's size (heartbeats, outcomes, put-backs, claims). */
  leasePoolSize: number;
  /** The maintenance pool's size (sweeper, pruner, history mover, recurring tick). */
  maintenancePoolSize: number;
  statementTimeoutMs: number;
  connectTimeoutMs: number;
  transactionPooler: boolean;
  /** false, or the TransactionHost to ask: its connection name (undefined: the default one). */
  ambientTransactions: false | { connectionName: string | undefined };
  queues: Record<string, JobHandlerOptions>;
  maintenance: {
    enabled: boolean;
    sweepIntervalMs: number;
    pruneIntervalMs: number;
    completedRetentionMs: number;
    failedRetentionMs: number | null;
    eventRetentionMs: number;
    pruneBatchSize: number;
    /** null: partitioned history is off. */
    history: { partitionWidth: HistoryPartitionWidth; moveAfterMs: number; moveIntervalMs: number; moveBatchSize: number } | null;
  };
  recurring: {
    enabled: boolean;
    pollIntervalMs: number;
    orphanAfterMs: number;
  };
  health: {
    claimStalledAfterMs: number;
    maxEventLoopLagMs: number;
  };
  /** job.log()'s bounds: lines kept per job, characters per line. */
  jobLogs: {
    maxLines: number;
    maxLineLength: number;
  };
}

const MAX_TIMER_MS = 2_147_483_647; // setTimeout's limit

function int(where: string, name: string, value: unknown, fallback: number, min: number, max = MAX_TIMER_MS): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new PgQueueError(INVALID_OPTION(where, name, value, `an integer from ${min} to ${max}`));
  }
  return value;
}

function bool(where: string, name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new PgQueueError(INVALID_OPTION(where, name, value, 'true or false'));
  return value;
}

export function assertQueueName(queue: unknown): asserts queue is string {
  if (typeof queue !== 'string' || !QUEUE_NAME_PATTERN.test(queue)) throw new PgQueueError(INVALID_QUEUE_NAME(queue));
}

/** A PgQueueModule's `name` (its database): checked where the module is declared. */
export function assertDatabaseName(name: unknown): string {
  if (typeof name !== 'string' || !DATABASE_NAME_PATTERN.test(name)) throw new PgQueueError(INVALID_DATABASE_NAME(name));
  return name;
}

const KNOWN_MODULE_KEYS = new Set([
  'dataSource', 'connection', 'listenerUrl', 'migrationsRun', 'workers', 'queues', 'workerId', 'leaseMs',
  'heartbeatMs', 'pollIntervalMs', 'fallbackPollIntervalMs', 'shutdownGraceMs', 'maxPayloadBytes', 'maxResultBytes', 'maintenance',
  'isGlobal', 'dataSourceName', 'name', 'ambientTransactions', 'poolSize', 'leasePoolSize', 'maintenancePoolSize', 'statementTimeoutMs', 'connectTimeoutMs', 'transactionPooler',
  'recurring', 'health', 'jobLogs',
]);
const KNOWN_HEALTH_KEYS = new Set(['claimStalledAfterMs', 'maxEventLoopLagMs']);
const KNOWN_JOB_LOGS_KEYS = new Set(['maxLines', 'maxLineLength']);
const KNOWN_RECURRING_KEYS = new Set(['enabled', 'pollIntervalMs', 'orphanAfterMs']);
const KNOWN_MAINTENANCE_KEYS = new Set([
  'enabled', 'sweepIntervalMs', 'pruneIntervalMs', 'completedRetentionMs', 'failedRetentionMs', 'eventRetentionMs', 'pruneBatchSize', 'history',
]);
const KNOWN_HISTORY_KEYS = new Set(['partitionWidth', 'moveAfterMs', 'moveIntervalMs', 'moveBatchSize']);
const WIDTH_MS: Record<HistoryPartitionWidth, number> = { hour: 3_600_000, day: 86_400_000, week: 7 * 86_400_000, month: 31 * 86_400_000 };
const KNOWN_HANDLER_KEYS = new Set(['concurrency', 'maxAttempts', 'backoff', 'timeoutMs', 'prefetch', 'batchSize', 'globalConcurrency', 'rateLimit', 'concurrencyPerKey', 'fairness', 'transactional', 'batch', 'eagerStart', 'rateLimitedBackoff', 'lifo', 'thread', 'recordEvents']);
const KNOWN_BATCH_KEYS = new Set(['size', 'waitMs']);

/** A transactional handler's default timeoutMs: it holds a connection of the app's pool while it runs. */
export const TRANSACTIONAL_TIMEOUT_MS = 60_000;

function refuseUnknownKeys(where: string, value: object, known: Set<string>): void {
  for (const key of Object.keys(value)) {
    if (!known.has(key)) throw new PgQueueError(`Unknown ${where} option "${key}"; known options: ${[...known].join(', ')}.`);
  }
}

export function resolveModuleOptions(options: PgQueueModuleOptions): ResolvedModuleOptions {
  const where = 'PgQueueModule';
  if (options === null || typeof options !== 'object') throw new PgQueueError(`${where} options must be an object.`);
  refuseUnknownKeys(where, options, KNOWN_MODULE_KEYS);
  const leaseMs = int(where, 'leaseMs', options.leaseMs, 30_000, 1_000);
  const heartbeatMs = int(where, 'heartbeatMs', options.heartbeatMs, Math.floor(leaseMs / 3), 100);
  if (heartbeatMs >= leaseMs) {
    throw new PgQueueError(INVALID_OPTION(where, 'heartbeatMs', heartbeatMs, `less than leaseMs (${leaseMs}), or the lease lapses between heartbeats`));
  }
  const m = options.maintenance ?? {};
  if (typeof m !== 'object') throw new PgQueueError(INVALID_OPTION(where, 'maintenance', m, 'an object'));
  refuseUnknownKeys(`${where} maintenance`, m, KNOWN_MAINTENANCE_KEYS);
  const failedRetentionMs =
    m.failedRetentionMs === null ? null : int(`${where} maintenance`, 'failedRetentionMs', m.failedRetentionMs, 7 * 86_400_000, 0, Number.MAX_SAFE_INTEGER);
  const completedRetentionMs = int(`${where} maintenance`, 'completedRetentionMs', m.completedRetentionMs, 86_400_000, 0, Number.MAX_SAFE_INTEGER);
  const history = resolveHistory(`${where} maintenance`, m.history, completedRetentionMs, failedRetentionMs);
  if (options.workerId !== undefined && (typeof options.workerId !== 'string' || options.workerId.length === 0 || options.workerId.length > 200)) {
    throw new PgQueueError(INVALID_OPTION(where, 'workerId', options.workerId, 'a non-empty string of at most 200 characters'));
  }
  if (options.listenerUrl !== undefined && typeof options.listenerUrl !== 'string') {
    throw new PgQueueError(INVALID_OPTION(where, 'listenerUrl', options.listenerUrl, 'a postgres:// URL'));
  }
  const transactionPooler = bool(where, 'transactionPooler', options.transactionPooler, false);
  if (transactionPooler && options.listenerUrl === undefined) throw new PgQueueError(POOLER_WITHOUT_LISTENER_URL());
  const ownPoolSize = typeof options.connection === 'object' && options.connection !== null ? (options.connection as { poolSize?: number }).poolSize : undefined;
  const queues = options.queues ?? {};
  if (typeof queues !== 'object') throw new PgQueueError(INVALID_OPTION(where, 'queues', queues, 'an object of queue name to handler options'));
  for (const [queue, queueOptions] of Object.entries(queues)) {
    assertQueueName(queue);
    resolveHandlerOptions(queue, queueOptions); // validate now; merged with the decorator's at discovery
  }
  const r = options.recurring ?? {};
  if (typeof r !== 'object') throw new PgQueueError(INVALID_OPTION(where, 'recurring', r, 'an object'));
  refuseUnknownKeys(`${where} recurring`, r, KNOWN_RECURRING_KEYS);
  const pollIntervalMs = int(where, 'pollIntervalMs', options.pollIntervalMs, 30_000, 10);
  const health = resolveHealth(`${where} health`, options.health, pollIntervalMs);
  return {
    workers: bool(where, 'workers', options.workers, true),
    migrationsRun: bool(where, 'migrationsRun', options.migrationsRun, true),
    workerId: options.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`,
    leaseMs,
    heartbeatMs,
    pollIntervalMs,
    fallbackPollIntervalMs: int(where, 'fallbackPollIntervalMs', options.fallbackPollIntervalMs, 1_000, 10),
    shutdownGraceMs: int(where, 'shutdownGraceMs', options.shutdownGraceMs, 10_000, 0),
    maxPayloadBytes: int(where, 'maxPayloadBytes', options.maxPayloadBytes, 1_048_576, 2, 256 * 1_048_576),
    maxResultBytes: int(where, 'maxResultBytes', options.maxResultBytes, 65_536, 2, 256 * 1_048_576),
    listenerUrl: options.listenerUrl,
    poolSize: int(where, 'poolSize', options.poolSize ?? ownPoolSize, 5, 1, 1_000),
    // Small: heartbeats, outcome batches and put-backs take turns (RowLockLane), claims are short and skip locks.
    leasePoolSize: int(where, 'leasePoolSize', options.leasePoolSize, 2, 1, 100),
    // One pass at a time per kind, each a statement at a time.
    maintenancePoolSize: int(where, 'maintenancePoolSize', options.maintenancePoolSize, 1, 1, 100),
    statementTimeoutMs: int(where, 'statementTimeoutMs', options.statementTimeoutMs, 60_000, 0),
    connectTimeoutMs: int(where, 'connectTimeoutMs', options.connectTimeoutMs, 10_000, 1),
    transactionPooler,
    ambientTransactions: ambientTransactionsOf(where, options.ambientTransactions),
    queues,
    maintenance: {
      enabled: bool(`${where} maintenance`, 'enabled', m.enabled, true),
      sweepIntervalMs: int(`${where} maintenance`, 'sweepIntervalMs', m.sweepIntervalMs, 5_000, 10),
      pruneIntervalMs: int(`${where} maintenance`, 'pruneIntervalMs', m.pruneIntervalMs, 60_000, 10),
      completedRetentionMs,
      failedRetentionMs,
      eventRetentionMs: int(`${where} maintenance`, 'eventRetentionMs', m.eventRetentionMs, 7 * 86_400_000, 0, Number.MAX_SAFE_INTEGER),
      // Capped so one DELETE batch stays seconds long, far under the default statementTimeoutMs of 60 s.
      pruneBatchSize: int(`${where} maintenance`, 'pruneBatchSize', m.pruneBatchSize, 5_000, 1, 50_000),
      history,
    },
    recurring: {
      enabled: bool(`${where} recurring`, 'enabled', r.enabled, true),
      pollIntervalMs: int(`${where} recurring`, 'pollIntervalMs', r.pollIntervalMs, 10_000, 10, 60_000),
      orphanAfterMs: int(`${where} recurring`, 'orphanAfterMs', r.orphanAfterMs, 300_000, 3_000),
    },
    health,
    jobLogs: resolveJobLogs(`${where} jobLogs`, options.jobLogs),
  };
}

/** jobLogs: job.log()'s bounds, each an integer; a job keeps at most maxLines lines of maxLineLength characters. */
function resolveJobLogs(where: string, value: PgQueueModuleOptions['jobLogs']): ResolvedModuleOptions['jobLogs'] {
  const l = value ?? {};
  if (l === null || typeof l !== 'object') throw new PgQueueError(INVALID_OPTION('PgQueueModule', 'jobLogs', l, '{ maxLines, maxLineLength }'));
  refuseUnknownKeys(where, l, KNOWN_JOB_LOGS_KEYS);
  return {
    maxLines: int(where, 'maxLines', l.maxLines, 100, 1, 10_000),
    maxLineLength: int(where, 'maxLineLength', l.maxLineLength, 2_000, 1, 100_000),
  };
}

/**
 * health: the bounds of progress. A claim stall bound at or under pollIntervalMs is refused: an idle claim loop answers
 * once per poll, so readiness would fail between two polls of a healthy queue whose jobs just came due.
 */
function resolveHealth(where: string, value: PgQueueModuleOptions['health'], pollIntervalMs: number): ResolvedModuleOptions['health'] {
  const h = value ?? {};
  if (h === null || typeof h !== 'object') throw new PgQueueError(INVALID_OPTION('PgQueueModule', 'health', h, '{ claimStalledAfterMs, maxEventLoopLagMs }'));
  refuseUnknownKeys(where, h, KNOWN_HEALTH_KEYS);
  const claimStalledAfterMs = int(where, 'claimStalledAfterMs', h.claimStalledAfterMs, Math.max(60_000, 2 * pollIntervalMs), 100);
  if (claimStalledAfterMs <= pollIntervalMs) {
    throw new PgQueueError(INVALID_OPTION(where, 'claimStalledAfterMs', claimStalledAfterMs, `more than pollIntervalMs (${pollIntervalMs}): an idle claim loop answers only once per poll, so a healthy queue would read as stalled`));
  }
  return { claimStalledAfterMs, maxEventLoopLagMs: int(where, 'maxEventLoopLagMs', h.maxEventLoopLagMs, 2_000, 50) };
}

/**
 * maintenance.history: off (false, absent), the defaults (true), or its options. A width longer than a retention
 * that is not 0 is refused: the kind's jobs would be kept up to a width past it (0 deletes completed jobs at
 * completion, so nothing of that kind moves).
 */
function resolveHistory(
  where: string,
  value: PgQueueMaintenanceOptions['history'],
  completedRetentionMs: number,
  failedRetentionMs: number | null,
): ResolvedModuleOptions['maintenance']['history'] {
  if (value === undefined || value === false) return null;
  const h = value === true ? {} : value;
  if (h === null || typeof h !== 'object') throw new PgQueueError(INVALID_OPTION(where, 'history', h, 'true, false or { partitionWidth, moveAfterMs, moveIntervalMs, moveBatchSize }'));
  refuseUnknownKeys(`${where} history`, h, KNOWN_HISTORY_KEYS);
  const partitionWidth = h.partitionWidth ?? 'day';
  if (!HISTORY_PARTITION_WIDTHS.includes(partitionWidth)) {
    throw new PgQueueError(INVALID_OPTION(`${where} history`, 'partitionWidth', partitionWidth, `one of ${HISTORY_PARTITION_WIDTHS.map((w) => `'${w}'`).join(', ')}`));
  }
  for (const [name, retention] of [['completedRetentionMs', completedRetentionMs], ['failedRetentionMs', failedRetentionMs]] as const) {
    if (retention !== null && retention > 0 && retention < WIDTH_MS[partitionWidth]) {
      throw new PgQueueError(
        INVALID_OPTION(`${where} history`, 'partitionWidth', partitionWidth, `at most ${name} (${retention} ms): a partition is dropped whole, so its jobs would be kept up to a ${partitionWidth} past their retention; choose a shorter width`),
      );
    }
  }
  return {
    partitionWidth,
    moveAfterMs: int(`${where} history`, 'moveAfterMs', h.moveAfterMs, 0, 0, Number.MAX_SAFE_INTEGER),
    moveIntervalMs: int(`${where} history`, 'moveIntervalMs', h.moveIntervalMs, 1_000, 10),
    moveBatchSize: int(`${where} history`, 'moveBatchSize', h.moveBatchSize, 5_000, 1, 50_000),
  };
}

/** Validates @JobHandler options (and per-queue overrides) and fills in defaults. */
export function resolveHandlerOptions(queue: string, options: JobHandlerOptions = {}): ResolvedHandlerOptions {
  const where = `@JobHandler('${queue}')`;
  if (options === null || typeof options !== 'object') throw new PgQueueError(`${where} options must be an object.`);
  refuseUnknownKeys(where, options, KNOWN_HANDLER_KEYS);
  // A thread handler's slots default to its threads (a job past them would hold its lease waiting for one).
  const thread = resolveThreadOptions(queue, where, options);
  const concurrency = int(where, 'concurrency', options.concurrency, thread ? thread.poolSize : 10, 1, 10_000);
  if (options.prefetch !== undefined && options.prefetch !== 'auto' && (typeof options.prefetch !== 'number' || !Number.isInteger(options.prefetch) || options.prefetch < 0 || options.prefetch > 10_000)) {
    throw new PgQueueError(INVALID_OPTION(where, 'prefetch', options.prefetch, `'auto' or an integer from 0 to 10000`));
  }
  const backoff = options.backoff;
  if (backoff !== undefined && typeof backoff !== 'function' && (backoff === null || typeof backoff !== 'object')) {
    throw new PgQueueError(INVALID_OPTION(where, 'backoff', backoff, 'a function (attempt, error) => ms, or { baseMs, maxMs, jitter }'));
  }
  const limits = resolveLimits(where, options);
  const transactional = bool(where, 'transactional', options.transactional, false);
  const batch = resolveBatch(where, options, transactional);
  // Not set: 'auto', except on a queue with limits that refuse read-ahead, or of batches, which never reads ahead.
  const prefetch = options.prefetch ?? (refusesReadAhead(limits) || batch ? 0 : 'auto');
  const eagerStart = bool(where, 'eagerStart', options.eagerStart, true);
  if (options.eagerStart === true && (hasLimits(limits) || batch)) {
    throw new PgQueueError(`${where}: eagerStart cannot be used with ${batch ? 'batch' : 'globalConcurrency, rateLimit, concurrencyPerKey or fairness'} (an eagerly claimed job would bypass the claim that ${batch ? 'gathers a batch' : 'enforces the limits'}).`);
  }
  const rlb = options.rateLimitedBackoff;
  if (rlb !== undefined && (rlb === null || typeof rlb !== 'object')) throw new PgQueueError(INVALID_OPTION(where, 'rateLimitedBackoff', rlb, '{ maxMs }'));
  if (rlb !== undefined) refuseUnknownKeys(`${where} rateLimitedBackoff`, rlb, KNOWN_RATE_LIMITED_BACKOFF_KEYS);
  return {
    lifo: bool(where, 'lifo', options.lifo, false),
    recordEvents: bool(where, 'recordEvents', options.recordEvents, false),
    rateLimitedBackoff: { maxMs: int(where, 'rateLimitedBackoff.maxMs', rlb?.maxMs, DEFAULT_RATE_LIMITED_MAX_MS, 1, MAX_BLOCK_MS) },
    eagerStart: eagerStart && !hasLimits(limits) && !batch,
    batch,
    ...(thread && { thread }),
    ...limits,
    concurrency,
    transactional,
    maxAttempts: int(where, 'maxAttempts', options.maxAttempts, 5, 1, 1_000),
    timeoutMs: options.timeoutMs === undefined ? (transactional ? TRANSACTIONAL_TIMEOUT_MS : undefined) : int(where, 'timeoutMs', options.timeoutMs, 0, 1),
    prefetch,
    batchSize: int(where, 'batchSize', options.batchSize, prefetch === 'auto' ? AUTO_MAX_IN_HAND : Math.min(concurrency + prefetch, 100), 1, 10_000),
    backoff:
      typeof backoff === 'function'
        ? backoff
        : exponentialBackoff({
            baseMs: int(where, 'backoff.baseMs', backoff?.baseMs, 10_000, 0),
            maxMs: int(where, 'backoff.maxMs', backoff?.maxMs, 86_400_000, 0),
            jitter: bool(where, 'backoff.jitter', backoff?.jitter, true),
          }),
  };
}

/** A batch handler's options (README, "Batch handlers"): refused beside read-ahead and transactional. */
function resolveBatch(where: string, options: JobHandlerOptions, transactional: boolean): ResolvedHandlerOptions['batch'] {
  const batch = options.batch;
  if (batch === undefined) return undefined;
  if (batch === null || typeof batch !== 'object') throw new PgQueueError(INVALID_OPTION(where, 'batch', batch, '{ size, waitMs? }'));
  refuseUnknownKeys(`${where} batch`, batch, KNOWN_BATCH_KEYS);
  const size = int(where, 'batch.size', batch.size ?? null, 0, 1, 1_000);
  const waitMs = int(where, 'batch.waitMs', batch.waitMs, 0, 0, 60_000);
  for (const [key, set] of [['prefetch', options.prefetch !== undefined && options.prefetch !== 0], ['batchSize', options.batchSize !== undefined], ['transactional', transactional]] as const) {
    if (set) throw new PgQueueError(`${where}: ${key} cannot be used with batch (a batch handler claims batch.size jobs per free call and reads nothing ahead${key === 'transactional' ? '; a transactional batch is not supported' : ''}).`);
  }
  return { size, waitMs };
}

type Limits = Pick<ResolvedHandlerOptions, 'globalConcurrency' | 'rateLimit' | 'concurrencyPerKey' | 'fairness'>;

/**
 * Whether a queue's limits refuse read-ahead: a job held ahead would hold a slot of globalConcurrency or
 * concurrencyPerKey, or use up a start of rateLimit, while it waits in one process. Fair share alone does not: a job
 * held ahead has taken its place in the shares when it was claimed, and caps nothing.
 */
export function refusesReadAhead({ globalConcurrency, rateLimit, concurrencyPerKey }: Pick<Limits, 'globalConcurrency' | 'rateLimit' | 'concurrencyPerKey'>): boolean {
  return globalConcurrency !== undefined || rateLimit !== undefined || concurrencyPerKey !== undefined;
}

/** Whether a queue has any limit across instances, fair share included (its claims then take turns under the queue's lock). */
export function hasLimits(limits: Pick<Limits, 'globalConcurrency' | 'rateLimit' | 'concurrencyPerKey'> & { fairness?: unknown }): boolean {
  return refusesReadAhead(limits) || limits.fairness !== undefined;
}

const KNOWN_FAIRNESS_KEYS = new Set(['weights', 'defaultWeight', 'key']);

/** A fair share key's weight: an integer from 1 to 1000. */
export function checkFairnessWeight(where: string, name: string, weight: unknown): number {
  if (typeof weight !== 'number' || !Number.isInteger(weight) || weight < 1 || weight > 1_000) {
    throw new PgQueueError(INVALID_OPTION(where, name, weight, 'an integer from 1 to 1000'));
  }
  return weight;
}

/** The fairness option (README, "Fair share across keys"). */
function resolveFairness(where: string, value: JobHandlerOptions['fairness']): ResolvedFairness | undefined {
  if (value === undefined) return undefined;
  if (value === true) return { weights: {}, defaultWeight: 1, key: undefined };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new PgQueueError(INVALID_OPTION(where, 'fairness', value, 'true or { weights?, defaultWeight?, key? }'));
  }
  refuseUnknownKeys(`${where} fairness`, value, KNOWN_FAIRNESS_KEYS);
  const weights: Record<string, number> = {};
  if (value.weights !== undefined) {
    if (value.weights === null || typeof value.weights !== 'object' || Array.isArray(value.weights)) {
      throw new PgQueueError(INVALID_OPTION(where, 'fairness.weights', value.weights, 'an object of key to weight'));
    }
    for (const [key, weight] of Object.entries(value.weights)) weights[key] = checkFairnessWeight(where, `fairness.weights[${JSON.stringify(key)}]`, weight);
  }
  const defaultWeight = value.defaultWeight === undefined ? 1 : checkFairnessWeight(where, 'fairness.defaultWeight', value.defaultWeight);
  if (value.key !== undefined && typeof value.key !== 'function') {
    throw new PgQueueError(INVALID_OPTION(where, 'fairness.key', value.key, 'a function (payload) => string'));
  }
  return { weights, defaultWeight, key: value.key };
}

/** The limits across instances (README, "Limits"). */
function resolveLimits(where: string, options: JobHandlerOptions): Limits {
  const globalConcurrency = options.globalConcurrency === undefined ? undefined : int(where, 'globalConcurrency', options.globalConcurrency, 0, 1, 1_000_000);
  const concurrencyPerKey = options.concurrencyPerKey === undefined ? undefined : int(where, 'concurrencyPerKey', options.concurrencyPerKey, 0, 1, 1_000_000);
  const rate = options.rateLimit;
  if (rate !== undefined && (rate === null || typeof rate !== 'object')) {
    throw new PgQueueError(INVALID_OPTION(where, 'rateLimit', rate, '{ max, intervalMs }'));
  }
  if (rate !== undefined) refuseUnknownKeys(`${where} rateLimit`, rate, KNOWN_RATE_LIMIT_KEYS);
  const rateLimit =
    rate === undefined
      ? undefined
      : {
          max: int(where, 'rateLimit.max', rate.max ?? null, 0, 1, 1_000_000),
          intervalMs: int(where, 'rateLimit.intervalMs', rate.intervalMs ?? null, 0, 1, 86_400_000),
        };
  // A prefetched job holds a slot (and used a start) while it waits for a free one in this process. Explicit
  // 'auto' is refused too: it would read ahead of short jobs.
  const limits = { globalConcurrency, rateLimit, concurrencyPerKey, fairness: resolveFairness(where, options.fairness) };
  if (refusesReadAhead(limits) && options.prefetch !== undefined && options.prefetch !== 0) throw new PgQueueError(LIMIT_WITH_PREFETCH(where));
  return limits;
}

const KNOWN_RATE_LIMIT_KEYS = new Set(['max', 'intervalMs']);
const KNOWN_RATE_LIMITED_BACKOFF_KEYS = new Set(['maxMs']);
/** rateLimitedBackoff.maxMs when not set: five minutes. */
const DEFAULT_RATE_LIMITED_MAX_MS = 300_000;
/** The longest block a RateLimitedError may ask or grow to: one day (the block is an int of ms in the row). */
export const MAX_BLOCK_MS = 86_400_000;

function ambientTransactionsOf(where: string, value: PgQueueModuleOptions['ambientTransactions']): ResolvedModuleOptions['ambientTransactions'] {
  if (value === undefined || value === false) return false;
  if (value === true) return { connectionName: undefined };
  const name = (value as { connectionName?: unknown } | null)?.connectionName;
  if (typeof value !== 'object' || value === null || typeof name !== 'string' || name.length === 0 || Object.keys(value).length !== 1) {
    throw new PgQueueError(INVALID_OPTION(where, 'ambientTransactions', value, 'true, false or { connectionName: string } (the name given to ClsPluginTransactional)'));
  }
  return { connectionName: name };
}
