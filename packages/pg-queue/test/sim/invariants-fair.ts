// The simulation's invariants for queue `fair` (fair share across keys, issue 42), from the run log and the
// trigger-kept sim_transitions.
import type pg from 'pg';
import type { SimPlan } from './generator.js';
import { liveRun, overlapViolations, type Facts, type Run, type Violation } from './invariants.js';

/** With a per-key cap, no key of queue `fair` ever runs more than the cap at once (fairness passes a key at its cap over). */
export function fairPerKeyHeld(facts: Facts, perKey: number | undefined): Violation[] {
  if (perKey === undefined) return [];
  const byKey = new Map<string, Run[]>();
  for (const r of facts.runs) if (r.queue === 'fair' && r.concurrency_key && liveRun(facts, r)) byKey.set(r.concurrency_key, [...(byKey.get(r.concurrency_key) ?? []), r]);
  return [...byKey].flatMap(([key, runs]) => overlapViolations(`fair-per-key(${key})`, runs, perKey));
}

/**
 * No key starves: a job of queue `fair` whose key had nothing queued when it was enqueued (every earlier job of its key
 * already claimed), and no job of a higher priority enqueued to its key before its claim (those go first), is claimed before at most `10 x slots + 30` first claims of jobs of other keys (or without one) made
 * after its enqueue, whenever those were enqueued. Stride scheduling starts such a key one job behind the queue's
 * clock, so its first job stands at most at the clock, and only jobs of other keys below it (about one clock unit
 * times their weights: at most 4 keys x 5 + 1 here), claims in flight, and claims before its enqueue committed can go
 * first. In run_at order it would wait for every job ahead of it (the workload's large bursts of key f1), and a key
 * left out of every claim's window, or a pass that never moved, for every job of the others. Only without a per-key
 * cap (a key at its cap is passed over, rightly, for as long as its jobs run: a frozen holder keeps them for a lease).
 * Not for jobs without a key: the claim finds those among the queue's first 200 due jobs only (README), so behind a
 * backlog of f1 they wait for it (seed 49 at 7 slots: 164 claims). Times: each job's first claim (statement_timestamp())
 * and its insert (clock_timestamp()).
 */
export async function fairNotOvertaken(db: pg.Pool, fair: SimPlan['fair']): Promise<Violation[]> {
  if (fair.perKey !== undefined) return [];
  const bound = 10 * fair.slots + 30;
  const { rows } = await db.query<{ job_id: string; k: string; overtaken: number }>(
    `WITH jobs AS (
       SELECT e.job_id, coalesce(e.concurrency_key, '') AS k,
              min(t.at) FILTER (WHERE t.op = 'insert') AS ins,
              min(t.stmt_at) FILTER (WHERE t.old_status = 'queued' AND t.new_status = 'processing') AS claimed,
              max(t.priority) FILTER (WHERE t.op = 'insert') AS prio
       FROM sim_enqueues AS e JOIN sim_transitions AS t ON t.job_id = e.job_id
       WHERE e.kind = 'fair' AND e.committed GROUP BY e.job_id, e.concurrency_key
     ), fresh AS (
       SELECT j.* FROM jobs AS j
       WHERE j.claimed IS NOT NULL AND j.k <> ''
         AND NOT EXISTS (SELECT 1 FROM jobs AS b WHERE b.k = j.k AND b.ins < j.ins AND (b.claimed IS NULL OR b.claimed > j.ins))
         -- Nor a job of its key of a higher priority enqueued before it was claimed: that one goes first within the key.
         AND NOT EXISTS (SELECT 1 FROM jobs AS b WHERE b.k = j.k AND b.prio > j.prio AND b.ins < j.claimed)
     )
     SELECT f.job_id::text, f.k, (SELECT count(*)::int FROM jobs AS o WHERE o.k <> f.k AND o.claimed > f.ins AND o.claimed < f.claimed) AS overtaken
     FROM fresh AS f`,
  );
  return rows
    .filter((r) => r.overtaken > bound)
    .map((r) => ({
      invariant: 'fair.overtaken',
      jobIds: [r.job_id],
      detail: `job ${r.job_id} of key ${r.k || '(none)'} was claimed after ${r.overtaken} jobs of other keys claimed since its enqueue (bound ${bound}: ${fair.slots} slots)`,
    }));
}

/**
 * Jobs without a key are found: a job of queue `fair` without a key, once fewer than 200 jobs enqueued before it are
 * queued (a fair claim reads the queue's first 200 due jobs for keyless ones), is claimed before at most
 * `130 + 10 x slots` first claims of keyed jobs. A claim looks for keyless jobs on every claim while its last look
 * found some, else once per KEYLESS_LOOK_MS (100 ms: at most about 100 claims here); once found they are one more key
 * of weight 1 (at most 10 x slots + 30 others ahead, as fairNotOvertaken). A claim loop that stopped looking for
 * good, or a look that never turned back on, lets every keyed job of the run go first. Before that the job waits,
 * rightly: with few slots the workload's backlogs of f1 (100 to 250 each) stack up past 200 (seed 63 at 3 slots:
 * 823 claims, every one while more than 200 were ahead), and jobs given back (a buffer returned, a lease swept)
 * are ahead again. Every queued spell of an earlier job counts as ahead (a retry's later run_at too: lenient). Its
 * wait ends at its first claim, or when it leaves the queue otherwise (a cancel).
 */
export async function fairKeylessFound(db: pg.Pool, fair: SimPlan['fair']): Promise<Violation[]> {
  const bound = 130 + 10 * fair.slots;
  // Each fair job's queued spells as +1 / -1 at the database clock, and its first claim and departure.
  const { rows: moves } = await db.query<{ job_id: string; at: Date; d: number }>(
    `SELECT t.job_id::text, t.stmt_at AS at,
            CASE WHEN t.new_status = 'queued' THEN 1 ELSE -1 END AS d
     FROM sim_transitions AS t JOIN sim_enqueues AS e ON e.job_id = t.job_id AND e.kind = 'fair' AND e.committed
     WHERE coalesce(t.new_status = 'queued', false) <> coalesce(t.old_status = 'queued', false)
     ORDER BY t.stmt_at, t.id`,
  );
  const { rows: jobs } = await db.query<{ job_id: string; keyed: boolean; ins: Date; claimed: Date | null; left_queued: Date | null }>(
    `SELECT e.job_id::text, e.concurrency_key IS NOT NULL AS keyed,
            min(t.stmt_at) FILTER (WHERE t.op = 'insert') AS ins,
            min(t.stmt_at) FILTER (WHERE t.old_status = 'queued' AND t.new_status = 'processing') AS claimed,
            min(t.stmt_at) FILTER (WHERE t.old_status = 'queued' AND t.new_status IS DISTINCT FROM 'queued') AS left_queued
     FROM sim_enqueues AS e JOIN sim_transitions AS t ON t.job_id = e.job_id
     WHERE e.kind = 'fair' AND e.committed GROUP BY e.job_id, e.concurrency_key`,
  );
  const insertedAt = new Map(jobs.map((j) => [j.job_id, j.ins.getTime()]));
  const keyedClaims = jobs.flatMap((j) => (j.keyed && j.claimed ? [j.claimed.getTime()] : [])).sort((a, b) => a - b);
  const violations: Violation[] = [];
  for (const f of jobs) {
    if (f.keyed) continue;
    const ins = f.ins.getTime();
    const end = (f.left_queued ?? f.claimed)?.getTime() ?? Infinity;
    // The first moment at or after its insert with fewer than 200 earlier jobs queued.
    const earlier = (m: (typeof moves)[number]) => (insertedAt.get(m.job_id) ?? Infinity) < ins;
    let queuedBefore = 0;
    let i = 0;
    for (; i < moves.length && moves[i].at.getTime() <= ins; i++) if (earlier(moves[i])) queuedBefore += moves[i].d;
    let inView = queuedBefore < 200 ? ins : Infinity;
    for (; inView === Infinity && i < moves.length; i++) {
      if (!earlier(moves[i])) continue;
      queuedBefore += moves[i].d;
      if (queuedBefore < 200) inView = moves[i].at.getTime();
    }
    const overtaken = keyedClaims.filter((c) => c > inView && c < end).length;
    if (overtaken > bound)
      violations.push({
        invariant: 'fair.keyless-found',
        jobIds: [f.job_id],
        detail: `job ${f.job_id} without a key waited while ${overtaken} keyed jobs were claimed after fewer than 200 enqueued before it were queued (bound ${bound}: ${fair.slots} slots)`,
      });
  }
  return violations;
}
