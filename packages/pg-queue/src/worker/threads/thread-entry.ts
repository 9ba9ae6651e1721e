// The code that runs inside a thread of a thread handler's pool (thread-pool.ts starts it as a Worker). It imports
// the handler's thread file once, then runs one job at a time as the main thread asks: the main thread keeps the
// job's lease, heartbeat, timeout and cancel, and writes its outcome; this side only computes and reports. It imports
// nothing of the library but the protocol's types, so a thread starts without loading Nest, TypeORM or pg.
import { parentPort, workerData } from 'node:worker_threads';
import { inspect } from 'node:util';
import { readAbort, type CrossedError, type FromThread, type ThreadEntryData, type ThreadJobData, type ToThread } from './thread-protocol.js';

/** The job's progress value, as JSON, at most this long (the main thread stores it as job.progress() does). */
const MAX_PROGRESS_CHARS = 65_536;
/**
 * A job.log() line crosses at most this long: the main thread cuts it to jobLogs.maxLineLength (2,000 by default, at
 * most 100,000) and marks it cut, so a longer one would only be copied to be cut (one past the bound keeps the mark).
 */
const MAX_LOG_CHARS = 100_001;

const port = parentPort!;
const { file, abort } = workerData as ThreadEntryData;
let loaded: Promise<(job: unknown) => unknown> | undefined;
let controller: AbortController | undefined;
/** Resolves the wait for the main thread's answer to `ready` (true: go), or ends it on an abort. */
let answer: ((go: boolean) => void) | undefined;

function crossed(error: unknown, what: string): CrossedError {
  if (error instanceof Error) return { name: error.name, message: error.message, stack: error.stack };
  return { name: 'Error', message: `${what} threw a non-Error value: ${inspect(error, { depth: 2, breakLength: Infinity })}`, stack: undefined };
}

function send(message: FromThread): void {
  port.postMessage(message);
}

function load(): Promise<(job: unknown) => unknown> {
  return (loaded ??= import(file).then(
    (mod: { default?: unknown }) => {
      if (typeof mod.default !== 'function') throw new Error(`the thread file ${file} has no default export that is a function (export default async function (job) { ... })`);
      return mod.default as (job: unknown) => unknown;
    },
    (error: unknown) => {
      const { message } = crossed(error, 'importing it');
      throw new Error(`the thread file ${file} could not be imported: ${message}`);
    },
  ));
}

function progress(this: void, jobId: string, value: unknown): void {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new Error(`job.progress() of job ${jobId}: the value is not JSON (${(error as Error).message})`);
  }
  if (json === undefined) throw new Error(`job.progress() of job ${jobId}: the value is not JSON (${typeof value}); pass a number or a small JSON value.`);
  if (json.length > MAX_PROGRESS_CHARS) throw new Error(`job.progress() of job ${jobId}: the value is ${json.length} characters as JSON, over the limit of ${MAX_PROGRESS_CHARS}.`);
  send({ type: 'progress', value: JSON.parse(json) as unknown });
}

/**
 * job.log(): the line crosses as text (a value that is not a string as util.inspect shows it, as the main thread's
 * job.log() does; a clone of it could fail), cut to MAX_LOG_CHARS; the main thread keeps and writes it with the attempt's
 * other lines. Sent at once, so a line logged inside a CPU-bound loop reaches the main thread while the loop runs on.
 * Never throws.
 */
function log(this: void, line: unknown): void {
  let text: string;
  try {
    text = typeof line === 'string' ? line : inspect(line, { depth: 3, breakLength: Infinity });
  } catch {
    text = `[unprintable ${typeof line}]`;
  }
  send({ type: 'log', line: text.length > MAX_LOG_CHARS ? text.slice(0, MAX_LOG_CHARS) : text });
}

/** AbortSignal's own getter (the job's signal shadows it with one that polls first). */
const ABORTED = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted')!.get!;

/** Aborts the job's signal once the main thread has raised the shared flag. */
function pollAbort(): void {
  if (!controller || (ABORTED.call(controller.signal) as boolean)) return;
  const reason = readAbort(abort);
  if (!reason) return;
  const error = new Error(reason.message);
  error.name = reason.name;
  controller.abort(error);
}

/**
 * The job's AbortSignal, whose `aborted` and `throwIfAborted()` also read the shared flag: a CPU-bound loop that
 * checks `job.signal.aborted` between slices sees the abort although its event loop never gets to the message.
 */
function signalOf(c: AbortController): AbortSignal {
  const signal = c.signal;
  Object.defineProperty(signal, 'aborted', { get: () => (pollAbort(), ABORTED.call(signal) as boolean) });
  const throwIfAborted = signal.throwIfAborted.bind(signal);
  Object.defineProperty(signal, 'throwIfAborted', { value: () => (pollAbort(), throwIfAborted()) });
  return signal;
}

async function run(data: ThreadJobData): Promise<void> {
  controller = new AbortController();
  const job = { ...data, signal: signalOf(controller), progress: (value: unknown) => progress(data.id, value), log };
  let result: unknown;
  try {
    const fn = await load();
    // Aborted while the thread file loaded or the message waited (a timeout, a cancel, a lease lost while this
    // process stalled): the main thread has ended the attempt already; the function is not called at all. A thread's
    // first job waits for the file's import, seconds in a process booting on a busy machine: the simulation saw jobs
    // of queue cpu begin in their thread after the sweeper had given them to another process (seed 449838067).
    job.signal.throwIfAborted(); // reads the shared flag first (signalOf)
    // Asked, not assumed: the main thread owns the lease, and refuses a start past the job's deadline (it stalled,
    // the job may run elsewhere; ThreadPool.mayBegin). One message each way per job.
    const go = await new Promise<boolean>((resolve) => {
      answer = resolve;
      send({ type: 'ready' });
    });
    job.signal.throwIfAborted();
    if (!go) throw new Error(`job ${data.id} (${data.queue}): the main thread refused its start (past its start deadline)`);
    result = await fn(job);
  } catch (error) {
    send({ type: 'failed', error: crossed(error, 'the thread function') });
    return;
  } finally {
    controller = undefined;
  }
  try {
    send({ type: 'done', result });
  } catch (error) {
    // A function, a class instance with private state, a symbol...: structured clone refuses it.
    const { name, message } = crossed(error, 'sending the result');
    send({ type: 'failed', error: { name, message: `job ${data.id} (${data.queue}): the thread function's result cannot be sent to the main thread (structured clone): ${message}`, stack: undefined } });
  }
}

port.on('message', (message: ToThread) => {
  if (message.type === 'run') void run(message.job);
  else if (message.type === 'abort') {
    pollAbort(); // an awaiting function hears it at once
    answered(false);
  } else answered(message.type === 'go');
});

function answered(go: boolean): void {
  const resolve = answer;
  answer = undefined;
  resolve?.(go);
}
