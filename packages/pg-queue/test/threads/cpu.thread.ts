// The thread file of the thread handlers' specs (thread-worker.ts's queues): what it does is in the job's payload.
// It records each run it starts in thread_runs on a connection of its own (a thread cannot use the main thread's
// pools), with its threadId, so the specs can tell a replaced thread from a reused one.
import { setPriority } from 'node:os';
import { threadId } from 'node:worker_threads';
import type { ThreadJob } from '../../src/index.js';
import { threadDb } from './thread-db.js';

export interface CpuPayload {
  burnMs?: number;
  /** Honour job.signal while burning (checked between slices); without it the loop ignores aborts. */
  cooperative?: boolean;
  throwError?: boolean;
  throwValue?: unknown;
  exitCode?: number;
  uncaught?: boolean;
  oom?: boolean;
  returnFunction?: boolean;
  progress?: number;
  record?: boolean;
  /** Lines to job.log(): the first before the burn, the rest after it. */
  logs?: unknown[];
}


/**
 * Runs a burn at a low priority, so that it yields to what runs beside the spec (the other specs of `npm test` on a
 * 2-core machine). On Linux a priority is a thread's own: this lowers this thread alone, while the process's main
 * thread (the heartbeat the spec is about, the plain queue) keeps its own; and only for the burn, so that a new
 * thread's start (imports, its connection) is not slowed past the 1 s timeouts. Raising it back needs CAP_SYS_NICE
 * (or RLIMIT_NICE): without, the thread stays low, which slows only its own later jobs.
 */
function lowPriority<T>(run: () => T): T {
  try {
    setPriority(10);
  } catch {
    // Not allowed here: the burn runs at the normal priority.
  }
  try {
    return run();
  } finally {
    try {
      setPriority(0);
    } catch {
      // See above.
    }
  }
}

/** Busy for `ms` of wall time: a CPU-bound loop that never yields to the thread's event loop. */
function burn(ms: number, signal?: AbortSignal): void {
  lowPriority(() => burnFor(ms, signal));
}

function burnFor(ms: number, signal?: AbortSignal): void {
  const until = Date.now() + ms;
  let x = 0;
  while (Date.now() < until) {
    for (let i = 0; i < 100_000; i++) x += Math.sqrt(i);
    if (signal?.aborted) throw signal.reason;
  }
  if (x < 0) throw new Error('unreachable');
}

export default async function (job: ThreadJob<CpuPayload>): Promise<unknown> {
  const p = job.payload;
  let runId: string | undefined;
  if (p.record !== false) {
    const c = await threadDb();
    const { rows } = await c.query<{ id: string }>(
      `INSERT INTO thread_runs (job_id, queue, attempt, thread_id, pid, started_at) VALUES ($1, $2, $3, $4, $5, clock_timestamp()) RETURNING id`,
      [job.id, job.queue, job.attempt, threadId, process.pid],
    );
    runId = rows[0].id;
  }
  if (p.progress !== undefined) job.progress(p.progress);
  const [first, ...rest] = p.logs ?? [];
  if (p.logs?.length) job.log(first as string);
  if (p.burnMs) burn(p.burnMs, p.cooperative ? job.signal : undefined);
  for (const line of rest) job.log(line as string);
  if (p.exitCode !== undefined) process.exit(p.exitCode);
  if (p.uncaught) {
    setTimeout(() => {
      throw new RangeError('uncaught in the thread');
    });
    await new Promise(() => undefined);
  }
  if (p.oom) {
    const hoard: number[][] = [];
    for (;;) hoard.push(new Array<number>(1_000_000).fill(1.5));
  }
  if (p.throwError) throw new TypeError(`bad pixels in job ${job.id}`);
  if ('throwValue' in p) throw p.throwValue;
  if (runId !== undefined) await (await threadDb()).query(`UPDATE thread_runs SET ended_at = clock_timestamp() WHERE id = $1`, [runId]);
  if (p.returnFunction) return { ok: true, callback: () => 1 };
  return { burned: p.burnMs ?? 0, threadId };
}
