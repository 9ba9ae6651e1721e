// The simulation's invariants for onConflict 'queue-after' (issue 43; generator.ts addLifoAndQueueAfter), read from the
// tables. A successor is a job blocked with a unique key and no flow (background_job_successors names it).
import type pg from 'pg';
import type { Violation } from './invariants.js';

/** At most one successor waits per key, at any sample (run-sim.ts reads it while the run goes on, and at its end). */
export async function successorsOnce(db: pg.Pool): Promise<Violation[]> {
  const { rows } = await db.query<{ key: string; ids: string[] }>(
    `SELECT queue_name || '/' || unique_key AS key, array_agg(id::text ORDER BY id) AS ids FROM background_jobs
     WHERE status = 'blocked' AND flow_id IS NULL AND unique_key IS NOT NULL GROUP BY queue_name, unique_key HAVING count(*) > 1`,
  );
  return rows.map((r) => ({ invariant: 'queue-after.two-successors', jobIds: r.ids, detail: `key ${r.key} has successors ${r.ids.join(', ')} waiting` }));
}

/**
 * Once the run has drained: no successor still waits without a live holder of its key (the statement that ended the
 * holder, the check at the enqueue's commit or the sweeper's pass must have started it), and every successor that ran
 * started after its promotion, never while a run of another job of its key that had not lost its claim was still on.
 */
export async function successorsStartAfterHolders(db: pg.Pool): Promise<Violation[]> {
  const out: Violation[] = [];
  const { rows: stranded } = await db.query<{ id: string; key: string }>(
    `SELECT s.id::text, s.queue_name || '/' || s.unique_key AS key FROM background_jobs AS s
     WHERE s.status = 'blocked' AND s.flow_id IS NULL AND s.unique_key IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM background_jobs AS h WHERE h.queue_name = s.queue_name AND h.unique_key = s.unique_key AND h.status IN ('queued', 'processing'))`,
  );
  for (const r of stranded) out.push({ invariant: 'queue-after.successor-stranded', jobIds: [r.id], detail: `successor ${r.id} of key ${r.key} still waits, and no job holds its key` });
  // Successors: inserted blocked without a flow. Their promotion (blocked to queued) and first run; the runs of the
  // key's other jobs that were the last run of their job and ended (a run whose claim was lost may go on after it).
  const { rows } = await db.query<{ id: string; promoted: Date | null; first_run: Date | null; overlapping: string | null }>(
    `WITH succ AS (
       SELECT t.job_id FROM sim_transitions AS t JOIN background_jobs AS j ON j.id = t.job_id
       WHERE t.op = 'insert' AND t.new_status = 'blocked' AND j.flow_id IS NULL AND j.unique_key IS NOT NULL
     )
     SELECT s.job_id::text AS id,
       (SELECT min(t.at) FROM sim_transitions AS t WHERE t.job_id = s.job_id AND t.old_status = 'blocked' AND t.new_status = 'queued') AS promoted,
       (SELECT min(r.started_at) FROM sim_runs AS r WHERE r.job_id = s.job_id) AS first_run,
       (SELECT string_agg(DISTINCT o.job_id::text, ',') FROM sim_runs AS o JOIN background_jobs AS oj ON oj.id = o.job_id
          JOIN background_jobs AS sj ON sj.id = s.job_id
        WHERE oj.queue_name = sj.queue_name AND oj.unique_key = sj.unique_key AND o.job_id <> s.job_id AND o.outcome IS NOT NULL
          AND o.ended_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sim_runs AS later WHERE later.job_id = o.job_id AND later.id > o.id)
          AND o.started_at < (SELECT min(r.started_at) FROM sim_runs AS r WHERE r.job_id = s.job_id)
          AND o.ended_at > (SELECT min(r.started_at) FROM sim_runs AS r WHERE r.job_id = s.job_id)) AS overlapping
     FROM succ AS s`,
  );
  for (const r of rows) {
    if (r.first_run === null) continue;
    if (r.promoted === null || r.first_run < r.promoted) out.push({ invariant: 'queue-after.ran-before-promoted', jobIds: [r.id], detail: `successor ${r.id} ran at ${r.first_run?.toISOString()}, promoted ${r.promoted?.toISOString() ?? 'never'}` });
    if (r.overlapping) out.push({ invariant: 'queue-after.ran-beside-holder', jobIds: [r.id, ...r.overlapping.split(',')], detail: `successor ${r.id} started while job(s) ${r.overlapping} of its key still ran` });
  }
  return out;
}
