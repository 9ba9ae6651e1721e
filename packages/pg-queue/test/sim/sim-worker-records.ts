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
 * past a 1 s lease (seeds 31 and 32: fresh processes lost leases in their first seconds). A timer every 100 ms; a
 * lag over half the lease is written at its end (signal PSTALL), with every run of this process that was running
 * or had ended within the lag and two leases (its outcome may not have been written yet) as held. A heartbeat that
 * waits on a pool or a lock leaves the event loop free: that is no stall, and stays unexcused.
 */
export function watchOwnStalls(records: pg.Pool, workerId: string, leaseMs: number): void {
  const everyMs = 100;
  let last = Date.now();
  setInterval(() => {
    const lagMs = Date.now() - last - everyMs;
    last = Date.now();
    if (lagMs < leaseMs / 2) return;
    void records
      .query(
        `WITH f AS (INSERT INTO fault_faults (worker, pid, signal) VALUES ($1, $2, 'PSTALL'))
         INSERT INTO fault_held (worker, job_id, attempt)
         SELECT DISTINCT $1, r.job_id, r.attempt FROM sim_runs r
         WHERE r.worker = $1 AND (r.ended_at IS NULL OR r.ended_at >= clock_timestamp() - $3 * interval '1 millisecond')`,
        [workerId, process.pid, lagMs + 2 * leaseMs],
      )
      .catch(() => undefined);
  }, everyMs).unref();
}
