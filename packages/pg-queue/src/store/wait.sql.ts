// The SQL of "why is this job not running?" (QueueService.whyNotRunning, README: "Why a job is not running"): the
// facts about one job that each gate reads, in one statement, every subquery bounded and on an index the claim
// itself uses. Times from the database clock.

const MS = `* interval '1 millisecond'`;

/** Most parents, key holders and workers a reason names; "ahead" is counted up to AHEAD_CAP. */
export const WAIT_LIST_CAP = 10;
export const AHEAD_CAP = 10_000;

export const WAIT_SQL = {
  // $1 the job's id. sleeping: the name of the durable sleep (job.sleep(), the last step recorded, with an `until`
  // still ahead) the job is in, else null. limited_running and key_holders read background_jobs_limited_idx (the running jobs a limited
  // claim counts); open_parents background_job_deps_open_idx; ahead background_jobs_claim_idx (the claim's order:
  // priority DESC, run_at, id), stopping at AHEAD_CAP.
  jobWaitFacts: `
    SELECT now() AS now, j.id::text AS id, j.queue_name, j.status, j.buffered, j.locked_by, j.run_at, j.attempts, j.max_attempts,
      j.last_error, j.concurrency_key, j.flow_id::text AS flow_id, j.fence_token > 0 AS ever_claimed,
      CASE WHEN jsonb_typeof(j.steps) = 'array' AND (j.steps -> -1) ? 'until' AND (j.steps -> -1 ->> 'until')::timestamptz > now()
           THEN j.steps -> -1 ->> 'name' END AS sleeping,
      (extract(epoch FROM j.run_at - now()) * 1000)::float8 AS due_in_ms,
      coalesce((SELECT q.paused FROM background_queues AS q WHERE q.queue_name = j.queue_name), false) AS paused,
      (SELECT count(*)::int FROM background_jobs AS r WHERE r.queue_name = j.queue_name AND r.status = 'processing' AND r.limited) AS limited_running,
      (SELECT coalesce(jsonb_agg(jsonb_build_object('worker', w.locked_by, 'n', w.n)), '[]'::jsonb) FROM (
         SELECT r.locked_by, count(*)::int AS n FROM background_jobs AS r
         WHERE r.queue_name = j.queue_name AND r.status = 'processing' AND r.limited
         GROUP BY r.locked_by ORDER BY count(*) DESC, r.locked_by LIMIT ${WAIT_LIST_CAP}) AS w) AS limited_by_worker,
      (SELECT coalesce(jsonb_agg(k.id::text ORDER BY k.id), '[]'::jsonb) FROM (
         SELECT r.id FROM background_jobs AS r
         WHERE j.concurrency_key IS NOT NULL AND r.queue_name = j.queue_name AND r.concurrency_key = j.concurrency_key
           AND r.status = 'processing' AND r.limited
         ORDER BY r.id LIMIT ${WAIT_LIST_CAP}) AS k) AS key_holders,
      (SELECT coalesce(jsonb_agg(jsonb_build_object('id', p.id::text, 'ref', p.flow_ref, 'status', p.status) ORDER BY p.id), '[]'::jsonb) FROM (
         SELECT p.id, p.flow_ref, p.status FROM background_job_deps AS d JOIN background_jobs AS p ON p.id = d.parent_id
         WHERE d.child_id = j.id AND NOT d.done ORDER BY d.parent_id LIMIT ${WAIT_LIST_CAP}) AS p) AS open_parents,
      -- onConflict 'queue-after': the live holder a waiting successor (blocked, with a key, of no flow) waits for.
      (SELECT jsonb_build_object('id', h.id::text, 'status', h.status, 'buffered', h.buffered) FROM background_jobs AS h
       WHERE j.status = 'blocked' AND j.flow_id IS NULL AND j.unique_key IS NOT NULL
         AND h.queue_name = j.queue_name AND h.unique_key = j.unique_key AND h.status IN ('queued', 'processing') LIMIT 1) AS successor_of,
      coalesce((SELECT q.lifo_jobs FROM background_queues AS q WHERE q.queue_name = j.queue_name), false) AS lifo_order,
      -- In the claim's order: FIFO (ClaimOrder 'fifo'), or, in a queue with LIFO jobs ('mixed'), its LIFO jobs first,
      -- newest first. (A queue whose handler has lifo: true walks every job newest first; the database does not know
      -- the handler's options: the count is the FIFO one there.)
      (SELECT count(*)::int FROM (
         SELECT 1 FROM background_jobs AS a
         WHERE a.queue_name = j.queue_name AND a.status = 'queued' AND a.run_at <= now() AND a.id <> j.id
           AND (a.priority > j.priority OR (a.priority = j.priority AND CASE
                 WHEN NOT coalesce((SELECT q.lifo_jobs FROM background_queues AS q WHERE q.queue_name = j.queue_name), false)
                   THEN (a.run_at, a.id) < (j.run_at, j.id)
                 WHEN j.lifo THEN a.lifo AND (a.run_at, a.id) > (j.run_at, j.id)
                 ELSE a.lifo IS TRUE OR (a.run_at, a.id) < (j.run_at, j.id) END))
         LIMIT ${AHEAD_CAP}) AS a) AS ahead
    FROM background_jobs_all AS j WHERE j.id = $1::int8`,

  // The rate limit's window of queue $1 ($2 its intervalMs), as the limited claim reads it: how many started in it,
  // and in how many ms its oldest claim leaves it (a start frees up then).
  rateWindow: `
    SELECT coalesce(sum(n), 0)::int AS started,
      (extract(epoch FROM min(started_at) + $2::int8 ${MS} - now()) * 1000)::float8 AS frees_in_ms
    FROM background_queue_starts WHERE queue_name = $1 AND started_at > now() - $2::int8 ${MS}`,
} as const;
