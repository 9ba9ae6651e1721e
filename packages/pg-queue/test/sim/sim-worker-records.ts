// What a process of the simulation records beside its runs (sim-worker.ts): the answers waitFor gave it
// (sim_waits), and the stalls of its own event loop (fault_faults, fault_held). Compiled with sim-worker.ts
// (run-sim.ts lists it in the worker's sources).
import type pg from 'pg';
import { JobFailedError, JobWaitTimeoutError, type QueueService } from '../../src/index.js';

/** waitFor(id), and what it answered: a result, a JobFailedError's status, a timeout, or another error. */
export async function waitAndRecord(records: pg.Pool, queue: QueueService, id: string): Promise<void> {
  await records.query('INSERT INTO sim_waits (job_id) VALUES ($1)', [id]);
  let answer: [string, string | null, string | null];
  try {
    answer = ['result', null, JSON.stringify((await queue.waitFor(id, { timeoutMs: 150_000 })) ?? null)];
  } catch (error) {
    if (error instanceof JobFailedError) answer = ['failed', error.status, null];
    else if (error instanceof JobWaitTimeoutError) answer = ['timeout', null, null];
    else answer = ['error', null, JSON.stringify(error instanceof Error ? error.message : String(error))];
  }
  await records.query('UPDATE sim_waits SET answer = $2, status = $3, result = $4::jsonb, answered_at = clock_timestamp() WHERE job_id = $1', [id, ...answer]).catch(() => undefined);
}

/**
 * A stall of this process alone is a fault, as a stall of the whole machine is (the fleet's StallWatch sees only
 * the test's own event loop): a process booted a moment ago on a loaded 2-core machine can have its event loop held
 * past a 1 s lease (seeds 31 and 32: fresh processes lost leases in their first seconds). A timer every 100 ms; its
 * lags summed over the last lease: half a lease or more (one long lag, or a process booting on a starved machine
 * whose every tick comes late: seed 410247917, w2.2's claims answered 0.5 to 1.9 s late in its first three seconds
 * with no single lag over 500 ms) is written at once (signal PSTALL), with every run of this process that was
 * running or had ended within the window and two leases (its outcome may not have been written yet) as held. A heartbeat that
 * waits on a pool or a lock leaves the event loop free: that is no stall, and stays unexcused. Every lag of a second
 * or more is also written to sim_lags: not a fault of the runs, but it delays what the process hears (waitFor).
 */
/** A lag this long or longer is written to sim_lags (it can make a waitFor answer late; invariants-waits.ts). */
const LAG_MS = 1_000;

export function watchOwnStalls(records: pg.Pool, workerId: string, leaseMs: number): void {
  const everyMs = 100;
  let last = Date.now();
  /** The lags of the ticks within the last lease, oldest first. */
  let recent: { at: number; lagMs: number }[] = [];
  setInterval(() => {
    const now = Date.now();
    const lagMs = Math.max(0, now - last - everyMs);
    last = now;
    if (lagMs >= LAG_MS) void records.query('INSERT INTO sim_lags (worker, lag_ms) VALUES ($1, $2)', [workerId, lagMs]).catch(() => undefined);
    recent = recent.filter((t) => t.at > now - leaseMs - lagMs);
    recent.push({ at: now, lagMs });
    const summed = recent.reduce((sum, t) => sum + t.lagMs, 0);
    if (summed < leaseMs / 2) return;
    recent = []; // one fault per window
    void records
      .query(
        `WITH f AS (INSERT INTO fault_faults (worker, pid, signal) VALUES ($1, $2, 'PSTALL'))
         INSERT INTO fault_held (worker, job_id, attempt)
         SELECT DISTINCT $1, r.job_id, r.attempt FROM sim_runs r
         WHERE r.worker = $1 AND (r.ended_at IS NULL OR r.ended_at >= clock_timestamp() - $3 * interval '1 millisecond')
         UNION
         -- And the jobs this worker claimed in that time, whose runs may not have begun yet: a thread handler's job
         -- handed to its thread before the stall began there after it, its run-log row written after this one
         -- (seed 659653567: job 1389 of queue cpu, claimed 3.3 s before its thread ran it, swept and run elsewhere).
         SELECT $1, t.job_id, a.n FROM sim_transitions t, LATERAL (VALUES (t.new_attempts), (t.new_attempts + 1)) AS a (n)
         WHERE t.new_locked_by = $1 AND t.new_status = 'processing' AND t.old_status IS DISTINCT FROM 'processing'
           AND t.stmt_at >= clock_timestamp() - $3 * interval '1 millisecond'`,
        [workerId, process.pid, Math.max(summed, lagMs + leaseMs) + 2 * leaseMs],
      )
      .catch(() => undefined);
  }, everyMs).unref();
}

/** SQLSTATEs and socket errors of a server going away or not yet back (admin shutdown, cannot connect now, ...). */
const GONE = new Set(['57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006', 'ECONNREFUSED', 'ECONNRESET', 'EPIPE']);

/**
 * The run log's pool, its queries waiting out a restart of PostgreSQL (the fault 'restart': down for seconds):
 * a query that meets a server gone is sent again every 100 ms for up to 30 s. A handler's first act is its
 * run-log row, so a run during the outage begins when the server is back, as a handler of an app whose own
 * statements wait on the database would; the rows stay the truth the invariants read.
 */
export function waitOutRestarts(pool: pg.Pool): void {
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  const gone = (error: unknown) => {
    const e = error as { code?: string; message?: string };
    return GONE.has(e.code ?? '') || /Connection terminated|terminating connection|the database system is (starting up|shutting down)/.test(e.message ?? '');
  };
  (pool as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = async (...args: unknown[]) => {
    for (let tries = 1; ; tries++) {
      try {
        return await query(...args);
      } catch (error) {
        if (!gone(error) || tries >= 300) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  };
}
