/**
 * The messages between the main thread and a thread of a thread handler's pool (thread-pool.ts, thread-entry.ts).
 * Everything crosses by structured clone; errors cross as plain fields, since an Error's class, and any fields of its
 * own, do not survive the clone in every Node version.
 */

/** The job as the thread's function receives it: plain data, cloned from the main thread's attempt. */
export interface ThreadJobData {
  id: string;
  queue: string;
  attempt: number;
  maxAttempts: number;
  priority: number;
  payload: unknown;
}

/** An error, readable on the other side: its name, message and stack (a thrown non-Error is described in message). */
export interface CrossedError {
  name: string;
  message: string;
  stack: string | undefined;
}

/**
 * `go` / `refuse`: the answer to the thread's `ready` (its file loaded, the function about to be called). The main
 * thread owns the attempt's lease: only it can tell whether the job may still begin (ThreadPool.mayBegin).
 */
export type ToThread = { type: 'run'; job: ThreadJobData } | { type: 'abort' } | { type: 'go' } | { type: 'refuse' };

export type FromThread =
  | { type: 'ready' }
  | { type: 'progress'; value: unknown }
  | { type: 'log'; line: string }
  | { type: 'done'; result: unknown }
  | { type: 'failed'; error: CrossedError };

/** What the thread entry is started with (workerData). */
export interface ThreadEntryData {
  /** The thread file's URL (file://...), imported once per thread. */
  file: string;
  /**
   * The abort notice, readable while the thread's event loop is blocked (a CPU-bound loop never sees a message): an
   * Int32 flag (1: aborted) then the reason as JSON text ({ name, message }, UTF-8, NUL-padded). See abortNotice.
   */
  abort: SharedArrayBuffer;
}

/** Bytes of the abort notice: the flag, then the reason. */
export const ABORT_FLAG_BYTES = 4;
export const ABORT_REASON_BYTES = 1_020;

/** Writes the reason, then raises the flag (Atomics: the thread reads the reason only after it sees the flag). */
export function raiseAbort(shared: SharedArrayBuffer, reason: { name: string; message: string }): void {
  const bytes = new TextEncoder().encode(JSON.stringify({ name: reason.name, message: reason.message.slice(0, 300) }));
  const target = new Uint8Array(shared, ABORT_FLAG_BYTES, ABORT_REASON_BYTES);
  target.fill(0);
  target.set(bytes.subarray(0, ABORT_REASON_BYTES));
  Atomics.store(new Int32Array(shared, 0, 1), 0, 1);
}

export function lowerAbort(shared: SharedArrayBuffer): void {
  Atomics.store(new Int32Array(shared, 0, 1), 0, 0);
}

/** The reason, once the flag is up (undefined while it is down). */
export function readAbort(shared: SharedArrayBuffer): { name: string; message: string } | undefined {
  if (Atomics.load(new Int32Array(shared, 0, 1), 0) !== 1) return undefined;
  const raw = new Uint8Array(shared, ABORT_FLAG_BYTES, ABORT_REASON_BYTES);
  const end = raw.indexOf(0);
  try {
    return JSON.parse(new TextDecoder().decode(raw.slice(0, end < 0 ? raw.length : end))) as { name: string; message: string };
  } catch {
    return { name: 'JobAbortedError', message: 'the attempt was aborted' };
  }
}
