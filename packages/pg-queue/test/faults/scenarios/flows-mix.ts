import type pg from 'pg';
import type { QueueService } from 'nestjs-pg-queue';

/**
 * Flows enqueued next to scenario 1's plain jobs, so that the same SIGKILLs hit them mid-flow. Each flow is a root,
 * a fan-out of `width` parts (each with a compensation), and a fan-in sink; every fourth flow has a part that always
 * fails (queue flow-fail, one attempt): its sink fails naming it, the rest of the flow is cancelled, and the
 * completed steps are compensated in reverse order (the parts' compensations before the root's).
 */
export async function enqueueFlowsMix(queue: QueueService, flows: number, jobMs: [number, number]): Promise<{ ids: string[]; failing: Set<string> }> {
  const [lo, hi] = jobMs;
  const ms = () => lo + Math.floor(Math.random() * (hi - lo + 1));
  const width = 5;
  const ids: string[] = [];
  const failing = new Set<string>();
  for (let f = 0; f < flows; f++) {
    const fails = f % 4 === 3;
    const parts = Array.from({ length: width }, (_, i) => ({
      ref: `part-${i}`,
      queue: fails && i === width - 1 ? 'flow-fail' : 'flow-step',
      payload: { ms: ms() },
      // Set at enqueue: this instance has no @JobHandler to take them from (see killWorkers).
      maxAttempts: fails && i === width - 1 ? 1 : 25,
      dependsOn: ['root'],
      compensate: { queue: 'flow-step', payload: { ms: ms() }, maxAttempts: 25 },
    }));
    const flow = await queue.enqueueFlow({
      name: `mix-${f}`,
      jobs: [
        { ref: 'root', queue: 'flow-step', payload: { ms: ms() }, maxAttempts: 25, compensate: { queue: 'flow-step', payload: { ms: ms() }, maxAttempts: 25 } },
        ...parts,
        { ref: 'sink', queue: 'flow-step', payload: { ms: ms() }, maxAttempts: 25, dependsOn: parts.map((p) => p.ref) },
      ],
    });
    ids.push(flow.id);
    if (fails) failing.add(flow.id);
  }
  return { ids, failing };
}

export interface FlowsAudit {
  flows: number;
  /** Flows not in the status they must end in (completed, or compensated for a failing one), with the status they have. */
  wrongEnd: { id: string; status: string }[];
  /** Runs of a job that started before one of its parents had completed (compensations included: reverse order). */
  early: { jobId: string; parentId: string }[];
  /** Jobs failed or cancelled because of a parent that ran anyway. */
  ranAfterParentFailed: string[];
  /** Flows whose compensations are not exactly one per completed compensable job (none for a completed flow). */
  wrongCompensations: string[];
  /** Runs redone although no fault hit their worker while it held the job: a child unblocked twice would show here. */
  unexplainedReruns: string[];
}

/** Reads the flows back from the tables once they have all ended. */
export async function auditFlows(db: pg.Pool, ids: string[], failing: Set<string>): Promise<FlowsAudit> {
  const { rows: ends } = await db.query<{ id: string; status: string }>(`SELECT id::text, status FROM background_flows WHERE id = ANY($1::int8[])`, [ids]);
  const wrongEnd = ends.filter((f) => f.status !== (failing.has(f.id) ? 'compensated' : 'completed'));
  const { rows: early } = await db.query<{ jobId: string; parentId: string }>(
    `SELECT DISTINCT d.child_id::text AS "jobId", d.parent_id::text AS "parentId"
     FROM background_job_deps AS d JOIN fault_runs AS r ON r.job_id = d.child_id JOIN background_jobs AS p ON p.id = d.parent_id
     WHERE d.flow_id = ANY($1::int8[]) AND (p.status <> 'completed' OR r.started_at < p.finished_at)`,
    [ids],
  );
  const { rows: ranAfter } = await db.query<{ id: string }>(
    `SELECT DISTINCT j.id::text FROM background_jobs AS j JOIN fault_runs AS r ON r.job_id = j.id
     WHERE j.flow_id = ANY($1::int8[]) AND j.last_error LIKE 'parent job %'`,
    [ids],
  );
  const { rows: compensations } = await db.query<{ id: string }>(
    `SELECT f.id::text FROM background_flows AS f
     WHERE f.id = ANY($1::int8[]) AND
       (SELECT count(*) FROM background_jobs AS c WHERE c.flow_id = f.id AND c.compensates IS NOT NULL) <>
       CASE WHEN f.status = 'completed' THEN 0 ELSE
         (SELECT count(*) FROM background_jobs AS o WHERE o.flow_id = f.id AND o.compensates IS NULL AND o.compensate IS NOT NULL AND o.status = 'completed') END`,
    [ids],
  );
  const { rows: reruns } = await db.query<{ id: string }>(
    `SELECT DISTINCT r.job_id::text AS id FROM fault_runs AS r JOIN background_jobs AS j ON j.id = r.job_id
     WHERE j.flow_id = ANY($1::int8[]) AND EXISTS (SELECT 1 FROM fault_runs AS later WHERE later.job_id = r.job_id AND later.id > r.id)
       AND NOT EXISTS (SELECT 1 FROM fault_held AS h WHERE h.job_id = r.job_id AND h.attempt = r.attempt AND h.worker = r.worker)`,
    [ids],
  );
  return {
    flows: ends.length,
    wrongEnd,
    early,
    ranAfterParentFailed: ranAfter.map((r) => r.id),
    wrongCompensations: compensations.map((r) => r.id),
    unexplainedReruns: reruns.map((r) => r.id),
  };
}

/** Waits until every flow of `ids` has ended; throws with where they stand past the deadline. */
export async function flowsEnded(db: pg.Pool, ids: string[], deadline: number): Promise<void> {
  for (;;) {
    const { rows } = await db.query<{ open: number }>(`SELECT count(*)::int AS open FROM background_flows WHERE id = ANY($1::int8[]) AND finished_at IS NULL`, [ids]);
    if (rows[0].open === 0) return;
    if (Date.now() > deadline) {
      const { rows: states } = await db.query(`SELECT status, count(*)::int AS n FROM background_flows WHERE id = ANY($1::int8[]) GROUP BY 1`, [ids]);
      throw new Error(`flows still open after the deadline: ${JSON.stringify(states)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
