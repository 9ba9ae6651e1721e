import { statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { isAbsolute } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { JobHandlerOptions, ResolvedThreadOptions } from '../interfaces/job-handler-options.interface.js';
import { INVALID_OPTION } from '../pg-queue.messages.js';
import { THREAD_CONFLICT } from '../worker/threads/thread-messages.js';

const KNOWN_THREAD_KEYS = new Set(['file', 'poolSize', 'abortGraceMs', 'resourceLimits']);
const KNOWN_LIMIT_KEYS = new Set(['maxOldGenerationSizeMb', 'maxYoungGenerationSizeMb', 'codeRangeSizeMb', 'stackSizeMb']);

function intIn(where: string, name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) throw new PgQueueError(INVALID_OPTION(where, name, value, `an integer from ${min} to ${max}`));
  return value;
}

function refuseUnknown(where: string, value: object, known: Set<string>): void {
  for (const key of Object.keys(value)) if (!known.has(key)) throw new PgQueueError(`Unknown ${where} option "${key}"; known options: ${[...known].join(', ')}.`);
}

/**
 * A thread handler's options (README, "CPU-heavy handlers"), checked at boot: the file exists (an absolute path or a
 * file: URL: a relative path would depend on the process's working directory), poolSize 1 to 64, and nothing that
 * cannot run in a thread beside it (a transaction of the app's DataSource, a batch call, more slots than threads).
 */
export function resolveThreadOptions(queue: string, where: string, options: JobHandlerOptions): ResolvedThreadOptions | undefined {
  const thread = options.thread;
  if (thread === undefined) return undefined;
  if (thread === null || typeof thread !== 'object') throw new PgQueueError(INVALID_OPTION(where, 'thread', thread, '{ file, poolSize?, abortGraceMs?, resourceLimits? }'));
  refuseUnknown(`${where} thread`, thread, KNOWN_THREAD_KEYS);
  if (options.transactional === true) throw new PgQueueError(THREAD_CONFLICT(queue, 'transactional', "a transaction of the app's DataSource cannot be handed to another thread"));
  if (options.batch !== undefined) throw new PgQueueError(THREAD_CONFLICT(queue, 'batch', 'a batch call settles its jobs one by one on the main thread'));
  const fileUrl = threadFileUrl(where, thread.file);
  const poolSize = intIn(where, 'thread.poolSize', thread.poolSize, Math.min(64, Math.max(1, availableParallelism() - 1)), 1, 64);
  if (options.concurrency !== undefined && typeof options.concurrency === 'number' && options.concurrency > poolSize) {
    throw new PgQueueError(THREAD_CONFLICT(queue, `concurrency ${options.concurrency} above thread.poolSize ${poolSize}`, 'the jobs past the threads would hold their leases waiting for one; raise poolSize or lower concurrency'));
  }
  const limits = thread.resourceLimits;
  if (limits !== undefined) {
    if (limits === null || typeof limits !== 'object') throw new PgQueueError(INVALID_OPTION(where, 'thread.resourceLimits', limits, '{ maxOldGenerationSizeMb?, maxYoungGenerationSizeMb?, codeRangeSizeMb?, stackSizeMb? }'));
    refuseUnknown(`${where} thread.resourceLimits`, limits, KNOWN_LIMIT_KEYS);
    for (const [key, value] of Object.entries(limits)) intIn(where, `thread.resourceLimits.${key}`, value, 0, 1, 1_048_576);
  }
  return { fileUrl, poolSize, abortGraceMs: intIn(where, 'thread.abortGraceMs', thread.abortGraceMs, 1_000, 0, 60_000), resourceLimits: limits };
}

function threadFileUrl(where: string, file: unknown): string {
  let path: string;
  if (file instanceof URL || (typeof file === 'string' && file.startsWith('file:'))) {
    try {
      path = fileURLToPath(file);
    } catch (error) {
      throw new PgQueueError(INVALID_OPTION(where, 'thread.file', String(file), `a file: URL of a JavaScript file (${(error as Error).message})`));
    }
  } else if (typeof file === 'string' && isAbsolute(file)) {
    path = file;
  } else {
    throw new PgQueueError(
      INVALID_OPTION(where, 'thread.file', file instanceof URL ? file.href : file, "an absolute path or a file: URL of the thread's JavaScript file (e.g. new URL('./resize.thread.js', import.meta.url))"),
    );
  }
  let isFile = false;
  try {
    isFile = statSync(path).isFile();
  } catch {
    // not there: said below
  }
  if (!isFile) throw new PgQueueError(INVALID_OPTION(where, 'thread.file', path, 'a file that exists (the thread module; is it compiled to JavaScript there?)'));
  return pathToFileURL(path).href;
}
