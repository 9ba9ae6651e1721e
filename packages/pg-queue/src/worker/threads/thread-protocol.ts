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

export type ToThread = { type: 'run'; job: ThreadJobData } | { type: 'abort'; reason: CrossedError };

export type FromThread =
  | { type: 'progress'; value: unknown }
  | { type: 'done'; result: unknown }
  | { type: 'failed'; error: CrossedError };

/** What the thread entry is started with (workerData). */
export interface ThreadEntryData {
  /** The thread file's URL (file://...), imported once per thread. */
  file: string;
}
