import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { JobAbortedError, PgQueueError } from '../../errors/pg-queue.error.js';
import type { ResolvedThreadOptions } from '../../interfaces/job-handler-options.interface.js';
import { errorLine } from '../../utils/error-text.js';
import type { PgQueueLogger } from '../../utils/pg-queue-logger.js';
import type { JobAttempt } from '../job-attempt.js';
import { THREAD_ENTRY_MISSING } from './thread-messages.js';
import { ABORT_FLAG_BYTES, ABORT_REASON_BYTES, lowerAbort, raiseAbort, type CrossedError, type FromThread, type ThreadEntryData, type ToThread } from './thread-protocol.js';

/** The compiled entry beside this file (dist/worker/threads/thread-entry.js). */
const ENTRY = new URL('./thread-entry.js', import.meta.url);

/** One job handed to the pool: waiting for a thread, then running on one, until it settles (once). */
interface Task {
  attempt: JobAttempt;
  resolve: (result: unknown) => void;
  reject: (error: unknown) => void;
  settled: boolean;
  stopListening: () => void;
}

interface PooledThread {
  worker: Worker;
  /** The abort notice shared with the thread (thread-protocol.ts). */
  abort: SharedArrayBuffer;
  task: Task | undefined;
  /** Set once the thread was asked to stop: terminated if still busy when it fires. */
  killTimer: NodeJS.Timeout | undefined;
  gone: boolean;
}

/**
 * The threads of one thread handler (`thread: { file, poolSize }`): at most poolSize node:worker_threads Workers,
 * started on demand, each running one job at a time; jobs beyond them wait here (their leases kept by the main thread
 * meanwhile). The main thread owns the attempt: its lease and heartbeat (the worker's, as for any handler), its
 * timeout and cancel (the attempt's signal, which this pool forwards to the thread and, after abortGraceMs, enforces
 * by terminating the thread), its progress (forwarded to the attempt) and its outcome (the promise run() returns).
 * A thread that crashes (an uncaught error, process.exit, out of memory under resourceLimits) fails its job and is
 * replaced by the next job that needs one.
 */
export class ThreadPool {
  private readonly threads = new Set<PooledThread>();
  private readonly waiting: Task[] = [];
  private closed = false;

  constructor(
    private readonly queue: string,
    private readonly options: ResolvedThreadOptions,
    private readonly logger: PgQueueLogger,
  ) {
    const entry = fileURLToPath(ENTRY);
    if (!existsSync(entry)) throw new PgQueueError(THREAD_ENTRY_MISSING(queue, entry));
  }

  /** Runs the job on a thread; settles with the thread function's result, its error, or the attempt's abort reason. */
  run(attempt: JobAttempt): Promise<unknown> {
    const before = attempt.abortReason();
    if (before !== undefined) return Promise.reject(before);
    if (this.closed) return Promise.reject(new JobAbortedError(`job ${attempt.id} (${this.queue}): the thread pool is closed (shutting down)`));
    return new Promise((resolve, reject) => {
      const task: Task = { attempt, resolve, reject, settled: false, stopListening: () => undefined };
      const onAbort = () => this.aborted(task);
      const signal = attempt.signal;
      signal.addEventListener('abort', onAbort, { once: true });
      task.stopListening = () => signal.removeEventListener('abort', onAbort);
      this.waiting.push(task);
      this.dispatch();
    });
  }

  /** Terminates every thread (the shutdown's grace is over: the worker pool has aborted and put back what still ran). */
  async close(): Promise<void> {
    this.closed = true;
    for (const task of this.waiting.splice(0)) this.settle(task, new JobAbortedError(`job ${task.attempt.id} (${this.queue}): the thread pool closed before a thread was free`));
    const threads = [...this.threads];
    this.threads.clear();
    await Promise.all(
      threads.map(async (thread) => {
        thread.gone = true;
        clearTimeout(thread.killTimer);
        if (thread.task) this.settle(thread.task, new JobAbortedError(`job ${thread.task.attempt.id} (${this.queue}): its thread was terminated at shutdown`));
        await thread.worker.terminate();
      }),
    );
  }

  private dispatch(): void {
    while (this.waiting.length > 0 && !this.closed) {
      const thread = this.idleThread();
      if (!thread) return;
      const task = this.waiting.shift()!;
      thread.task = task;
      lowerAbort(thread.abort);
      const { attempt } = task;
      const job = { id: attempt.id, queue: attempt.queue, attempt: attempt.attempt, maxAttempts: attempt.maxAttempts, priority: attempt.priority, payload: attempt.payload };
      try {
        thread.worker.postMessage({ type: 'run', job } satisfies ToThread);
      } catch (error) {
        thread.task = undefined;
        this.settle(task, new PgQueueError(`job ${attempt.id} (${this.queue}): its payload cannot be sent to a thread (structured clone): ${errorLine(error)}`));
      }
    }
  }

  /** A thread without a job, or a new one while the pool has room. */
  private idleThread(): PooledThread | undefined {
    for (const thread of this.threads) if (!thread.task && !thread.gone) return thread;
    if (this.threads.size >= this.options.poolSize) return undefined;
    return this.spawn();
  }

  private spawn(): PooledThread {
    const abort = new SharedArrayBuffer(ABORT_FLAG_BYTES + ABORT_REASON_BYTES);
    const workerData: ThreadEntryData = { file: this.options.fileUrl, abort };
    const worker = new Worker(ENTRY, { workerData, resourceLimits: this.options.resourceLimits });
    // Idle threads do not keep the process alive; a running job's lease and connections do.
    worker.unref();
    const thread: PooledThread = { worker, abort, task: undefined, killTimer: undefined, gone: false };
    this.threads.add(thread);
    worker.on('message', (message: FromThread) => this.answered(thread, message));
    worker.on('error', (error: Error) => this.crashed(thread, this.crashText(error), outOfMemory(error) ? undefined : error.stack, true));
    worker.on('exit', (code: number) => this.crashed(thread, `exited with code ${code}`, undefined, false));
    return thread;
  }

  private answered(thread: PooledThread, message: FromThread): void {
    const task = thread.task;
    if (message.type === 'ready') {
      thread.worker.postMessage({ type: this.mayBegin(task) ? 'go' : 'refuse' } satisfies ToThread);
      return;
    }
    if (!task) return;
    if (message.type === 'log') {
      // A line logged before the abort was heard: the attempt's outcome (or put-back) writes it, as on the main thread.
      task.attempt.log(message.line);
      return;
    }
    if (message.type === 'progress') {
      if (task.settled) return;
      try {
        task.attempt.progress(message.value);
      } catch (error) {
        this.logger.warn(`job ${task.attempt.id} (${this.queue}): progress from its thread not recorded: ${errorLine(error)}`);
      }
      return;
    }
    // The job is done on this thread (even one aborted meanwhile, which stopped within the grace): the thread is free.
    thread.task = undefined;
    clearTimeout(thread.killTimer);
    thread.killTimer = undefined;
    if (message.type === 'done') this.settle(task, undefined, message.result);
    else this.settle(task, readable(message.error));
    this.dispatch();
  }

  /**
   * The thread has its file loaded and is about to call the function (its `ready`): it may, unless the attempt ended
   * meanwhile or the job is past its start deadline. That deadline (HeldJob.startBy: half the lease after the claim,
   * the start mark or the last heartbeat that renewed it) passes only when this process stalled: its heartbeats
   * stopped, so the lease may have lapsed and the sweeper given the job to another process, which runs it. Only the
   * main thread can tell (it owns the lease); the thread waits for the answer, so a thread that loaded during the stall
   * asks after it and is refused (the simulation's seeds 659653567 and 449838067 saw such jobs begin on their thread
   * after another process had taken them). A refused attempt fails as any other (its write is fenced out if the job
   * is no longer this process's).
   */
  private mayBegin(task: Task | undefined): boolean {
    if (!task || task.settled) return false;
    const startBy = (task.attempt as { startBy?: number }).startBy ?? Infinity;
    const late = performance.now() - startBy;
    if (late < 0) return true;
    const { attempt } = task;
    this.settle(task, new Error(`job ${attempt.id} (${this.queue}): not started on its thread, which was ready ${Math.round(late)} ms past the job's start deadline: this process stalled past half the job's lease, which may have lapsed (another process may run the job); the attempt is not run`));
    return false;
  }

  /**
   * What a thread's 'error' event says in the job's error. Out of memory is worded by the library: Node's own text
   * ("Worker terminated due to reaching memory limit: JS heap out of memory") reads, in a log, as if the process had
   * died of it (V8's fatal "JavaScript heap out of memory" of a whole process; supervisors and test runners that
   * watch a process's stderr for it take it so), while only the thread was stopped at its limit.
   */
  private crashText(error: Error): string {
    if (!outOfMemory(error)) return `crashed: ${errorLine(error)}`;
    const limits = this.options.resourceLimits;
    const which = limits ? `resourceLimits ${JSON.stringify(limits)}` : "Node's default limit; resourceLimits sets it";
    return `ran out of memory: stopped at its heap limit (ERR_WORKER_OUT_OF_MEMORY; ${which})`;
  }

  /** The thread is gone (an uncaught error, process.exit, out of memory, or terminated by this pool): its job fails. */
  private crashed(thread: PooledThread, what: string, stack: string | undefined, terminate: boolean): void {
    if (thread.gone && !this.threads.has(thread)) return;
    thread.gone = true;
    this.threads.delete(thread);
    clearTimeout(thread.killTimer);
    const task = thread.task;
    thread.task = undefined;
    if (task && !task.settled) {
      const error = new Error(`job ${task.attempt.id} (${this.queue}): its thread ${what}; the thread is replaced`);
      if (stack) error.stack = `${error.name}: ${error.message}\n  thread's stack: ${stack}`;
      this.settle(task, error);
    }
    if (terminate) void thread.worker.terminate();
    this.dispatch();
  }

  /** The attempt was aborted (timeout, cancel, lost lease, shutdown): the thread is told, and terminated if it runs on past the grace. */
  private aborted(task: Task): void {
    const reason = task.attempt.abortReason();
    const at = this.waiting.indexOf(task);
    if (at >= 0) this.waiting.splice(at, 1);
    this.settle(task, reason);
    const thread = [...this.threads].find((t) => t.task === task);
    if (!thread) return;
    raiseAbort(thread.abort, reason instanceof Error ? reason : { name: 'Error', message: errorLine(reason) });
    thread.worker.postMessage({ type: 'abort' } satisfies ToThread);
    thread.killTimer = setTimeout(() => {
      if (thread.task !== task) return;
      this.logger.warn(`job ${task.attempt.id} (${this.queue}): its thread ran on ${this.options.abortGraceMs} ms after the attempt was aborted (${errorLine(reason)}); terminating the thread`);
      void thread.worker.terminate();
    }, this.options.abortGraceMs);
  }

  private settle(task: Task, error: unknown, result?: unknown): void {
    if (task.settled) return;
    task.settled = true;
    task.stopListening();
    if (error === undefined) task.resolve(result);
    else task.reject(error);
  }
}

function outOfMemory(error: Error): boolean {
  return (error as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY';
}

/** The thread's error as an Error of the main thread, with the thread's name, message and stack. */
function readable(crossed: CrossedError): Error {
  const error = new Error(crossed.message);
  error.name = crossed.name;
  error.stack = crossed.stack ?? `${crossed.name}: ${crossed.message}`;
  return error;
}
