/**
 * The job a thread handler's function receives (`thread: { file }`; `export default async function (job: ThreadJob) {}`):
 * plain data cloned from the main thread, the attempt's abort notice, and progress. What the function returns is the
 * job's result (it crosses back by structured clone, then is stored as JSON); what it throws fails the attempt.
 */
export interface ThreadJob<TPayload = unknown> {
  readonly id: string;
  readonly queue: string;
  /** 1-based: 1 on the first run. */
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly priority: number;
  readonly payload: TPayload;
  /**
   * Aborted when the main thread gives up the attempt (timeout, cancel, lost lease, shutdown): stop soon. A thread
   * still running `abortGraceMs` later is terminated and replaced.
   */
  readonly signal: AbortSignal;
  /** Reports progress (a number or a small JSON value); the main thread writes it with the next heartbeat. */
  progress(value: unknown): void;
  /**
   * Adds a line to the job's log, as `Job.log()` does (README: "Job logs"): the line goes to the main thread at once
   * (a value that is not a string as util.inspect shows it), which keeps it within `jobLogs`' bounds and writes it with
   * the next heartbeat or the attempt's outcome. Never throws.
   */
  log(line: string): void;
}
