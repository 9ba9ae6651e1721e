import { waitFor } from '../../support/test-app.js';
import { auditRuns, statusCounts, type RunAudit } from '../support/fault-db.js';
import { FAULT_TIMINGS, sleep, type Scenario } from '../support/scenario.js';

export interface FrozenJob {
  id: string;
  fail: boolean;
  status: string;
  attempts: number;
  lockedBy: string;
  /** Last write to the row, and when the frozen worker's handler settled (database clock). */
  updatedAt: Date;
  lateOutcomeAt: Date;
  runs: { attempt: number; worker: string; result: string | null }[];
}

export interface FreezeWorkerResult {
  frozen: string;
  rescuer: string;
  held: number;
  frozenMs: number;
  jobs: FrozenJob[];
  audit: RunAudit;
  states: Record<string, number>;
  /** What the frozen worker logged about its late outcomes. */
  frozenLog: string;
  seconds: number;
}

const SPIN_MS = 3_000;

/**
 * Scenario 3: a worker is frozen (SIGSTOP) in the middle of two jobs, past its lease. The sweeper of a
 * second worker puts them back, the second worker runs and completes them, then the first is resumed
 * (SIGCONT) and settles both late, one as a success and one as a failure. Neither late outcome may
 * change the rows.
 */
export async function freezeWorker(s: Scenario): Promise<FreezeWorkerResult> {
  const t0 = performance.now();
  const fleet = s.fleet();
  const frozen = await fleet.start('freeze-w1');
  const ids = await s.queue.enqueueMany([
    { queue: 'freeze', payload: { spinMs: SPIN_MS, fail: false, together: 2 } },
    { queue: 'freeze', payload: { spinMs: SPIN_MS, fail: true, together: 2 } },
  ]);
  const runsOf = async () =>
    (await s.db.query<{ job_id: string; worker: string; attempt: number; result: string | null; finished_at: Date | null }>(
      `SELECT job_id::text, worker, attempt, result, finished_at FROM fault_runs WHERE queue = 'freeze' ORDER BY job_id, attempt`,
    )).rows;
  await waitFor('both jobs running on the first worker', async () => (await runsOf()).length === 2, 30_000, 5);
  const held = await fleet.freeze(frozen);
  const frozenAt = performance.now();

  const rescuer = await fleet.start('freeze-w2');
  await waitFor('both jobs completed by the second worker', async () => (await statusCounts(s.db, 'freeze')).completed === 2, 30_000);
  await sleep(Math.max(0, SPIN_MS - (performance.now() - frozenAt))); // the frozen handlers' deadline has passed: they settle on resume
  const frozenMs = performance.now() - frozenAt;
  await fleet.resume(frozen);
  await waitFor('the late outcomes', async () => (await runsOf()).filter((r) => r.attempt === 1 && r.finished_at).length === 2, 30_000);
  await sleep(FAULT_TIMINGS.heartbeatMs * 3); // room for any late write to land, and for a heartbeat to notice the lost lease

  const { rows } = await s.db.query<{ id: string; fail: boolean; status: string; attempts: number; locked_by: string; updated_at: Date }>(
    `SELECT id::text, (payload->>'fail')::boolean AS fail, status::text, attempts, locked_by, updated_at FROM background_jobs WHERE id = ANY($1) ORDER BY id`,
    [ids],
  );
  const runs = await runsOf();
  const jobs = rows.map((j) => {
    const own = runs.filter((r) => r.job_id === j.id);
    return {
      id: j.id,
      fail: j.fail,
      status: j.status,
      attempts: j.attempts,
      lockedBy: j.locked_by,
      updatedAt: j.updated_at,
      lateOutcomeAt: own.find((r) => r.attempt === 1)!.finished_at!,
      runs: own.map((r) => ({ attempt: r.attempt, worker: r.worker, result: r.result })),
    };
  });
  return {
    frozen: frozen.workerId,
    rescuer: rescuer.workerId,
    held,
    frozenMs,
    jobs,
    audit: await auditRuns(s.db, 'freeze'),
    states: await statusCounts(s.db, 'freeze'),
    frozenLog: fleet.log(frozen),
    seconds: (performance.now() - t0) / 1_000,
  };
}
