// The simulation's invariant for a pause (the operator's `pause-resume`, read from sim_ops): nothing of a paused queue
// starts in any process, read from sim_transitions.
import type pg from 'pg';
import type { Violation } from './invariants.js';

/**
 * No job of a paused queue starts, all processes together, from the moment pause() returned (sim_ops t1: its commit came
 * before) until the first resume() of the queue that may have committed after the pause began (its t0, for each resume
 * whose t1 comes after the pause's t0: operators overlap, and the priority probe pauses `prio` too): no claim that
 * starts a job, no eager insert that does, no start mark of a job from a buffer (a row going to `processing` and not
 * `buffered`, from `queued`, from `buffered`, or inserted so). The start is judged by statement_timestamp() (stmt_at): a
 * statement that began after the pause's commit took its snapshot after it and read the pause (the claims'
 * `queueStopped`, the start mark's MUST_NOT_START), whether the pause's notice reached its process or not. The end by
 * the trigger's clock_timestamp() (at), taken after the statement's snapshot: a start before the resume was called read
 * the queue paused. A job held started ahead (armed) before the pause may still begin; its row said started at its
 * claim or mark, before.
 */
export async function nothingStartsWhilePaused(db: pg.Pool): Promise<Violation[]> {
  const { rows } = await db.query<{ job_id: string; at: Date; by: string | null; queue: string; from_at: Date; until_at: Date | null; how: string }>(
    `WITH pauses AS (
       SELECT p.detail ->> 'queue' AS queue, p.t1 AS from_at,
         (SELECT min(r.t0) FROM sim_ops AS r WHERE r.op = 'resume' AND r.detail ->> 'queue' = p.detail ->> 'queue' AND r.t1 >= p.t0) AS until_at
       FROM sim_ops AS p WHERE p.op = 'pause'
     )
     SELECT t.job_id::text, t.stmt_at AS at, t.new_locked_by AS by, p.queue, p.from_at, p.until_at,
       CASE WHEN t.op = 'insert' THEN 'an eager insert' WHEN t.old_status = 'queued' THEN 'a claim' ELSE 'a start mark' END AS how
     FROM pauses AS p
     JOIN sim_transitions AS t ON t.stmt_at >= p.from_at AND t.at < coalesce(p.until_at, 'infinity')
     JOIN background_jobs_all AS j ON j.id = t.job_id AND j.queue_name = p.queue
     WHERE t.new_status = 'processing' AND t.new_buffered IS FALSE
       AND (t.op = 'insert' OR (t.op = 'update' AND (t.old_status = 'queued' OR t.old_buffered)))
     ORDER BY t.stmt_at LIMIT 20`,
  );
  return rows.map((r) => ({
    invariant: 'pause.nothing-starts',
    jobIds: [r.job_id],
    detail: `job ${r.job_id} of queue ${r.queue} started by ${r.how} of ${r.by} at ${r.at.toISOString()}, while the queue was paused (pause() returned at ${r.from_at.toISOString()}, resume() called at ${r.until_at?.toISOString() ?? 'never'})`,
  }));
}
