// Enqueue of jobs with a unique key: one statement for any number of rows (unique-rows.ts folds and unfolds them).
import { JOBS_CHANNEL } from '../pg-queue.constants.js';
import { DEFER_WAKE, MS, REVIEW_CHANNEL, type Wake } from './shared.sql.js';

// Jobs with a unique key (and any plain jobs enqueued in the same enqueueMany call), one statement for any
// number of rows; plain enqueues keep insertJob/insertJobs, so a job without a key pays nothing for this.
// The caller folds rows of one key into one first (an ON CONFLICT cannot touch a row twice in a statement).
// Per row ($7 key, $8 onConflict, $9 uniqueForMs, $10 concurrency key):
// - a live key (no window) is held by a queued or running job, through the partial unique index. The
//   insert is ON CONFLICT DO NOTHING, which takes no lock on the holder: a DO UPDATE (even a no-op, even
//   with a false WHERE) would lock it until the caller's transaction ends, and a long transaction would then
//   stall the worker's outcome batch that completes a running holder. 'replace' and 'keep-run-at' then
//   update a holder that has not started: queued, or read ahead into a worker's buffer (which is put back
//   queued with the new payload; its holder is told to drop its copy, REVIEW_CHANNEL). A running holder is never
//   touched, the call is a duplicate of it; an UPDATE re-checks the row's latest version, so a holder claimed
//   or started meanwhile is left alone.
// - a window key (uniqueForMs) is held by its background_job_keys row until held_until, whatever became of
//   the job (the pruner may have deleted it). The upsert always writes, so that it always returns the row
//   and its job_id; it takes the window (with this row's pre-drawn id) only when the last one has ended.
// A duplicate's holder is read in the same statement, but a holder committed after this statement's snapshot
// (the insert waited for it, then found the conflict) is invisible to that read: its row comes back with a
// NULL outcome and the caller runs the statement again for it, with a fresh snapshot. (In the narrower race
// where the holder this snapshot sees finished and another job took the key since, the id returned is the
// first one's: the job that held the key when the call began.) Every row draws an id, duplicates included:
// the sequence has gaps where calls were duplicates.
// Lock order: a call (no manager) is one statement, and two calls naming the same keys in any orders must wait
// for each other, never deadlock. The statement writes in three phases, each in (queue, key) order and each
// finished before the next begins: (1) the windows' key rows, (2) the inserts, (3) the holders that 'replace'
// and 'keep-run-at' lock, then update. A call waits only on calls in the same phase at a smaller key, or on calls
// in a later phase (an insert waits on a holder's update; a lock on a holder someone updated), and a call in a
// later phase never waits on one in an earlier phase (phase 1 holds key rows only phase 1 asks for; an insert in
// progress is invisible to phase 3's lock, and a lock taken in phase 3 does not stop an insert's conflict check).
// So no cycle. Phase 2 used to come last, with phase 3's locks and updates interleaved in plan order: two calls whose
// snapshots differed by a third call's commit then deadlocked, 1 call in 400 (unique-jobs.spec's order test).
// traced: the variant that also writes the enqueue's trace context ($11, one for the whole call) into every row it
// inserts or replaces (see TRACED in shared.sql.ts).
function insertKeyedJobs(traced: boolean, wake: Wake): string {
  return `
    WITH input AS (
      SELECT * FROM ROWS FROM (unnest($1::text[]), jsonb_array_elements($2::jsonb), unnest($3::int[]), unnest($4::int[]),
                               unnest($5::timestamptz[]), unnest($6::int8[]), unnest($7::text[]), unnest($8::text[]), unnest($9::int8[]),
                               unnest($10::text[]))
        WITH ORDINALITY AS t(q, p, pr, ma, ra, d, k, mode, w, ck, ord)${wake === 'deferred' ? `
      WHERE ${DEFER_WAKE}` : ''}
    ), seq AS (
      SELECT pg_get_serial_sequence('background_jobs', 'id')::regclass AS s
    ), ids AS MATERIALIZED (
      SELECT i.ord, nextval((SELECT s FROM seq)) AS id FROM input AS i ORDER BY i.ord
    ), windows AS (
      -- Phase 1 of 3, the key rows of windows, in (queue, key) order (see Lock order above).
      INSERT INTO background_job_keys AS h (queue_name, unique_key, held_until, job_id)
      SELECT i.q, i.k, now() + i.w ${MS}, n.id FROM input AS i JOIN ids AS n ON n.ord = i.ord WHERE i.w IS NOT NULL
      ORDER BY i.q, i.k
      ON CONFLICT (queue_name, unique_key) DO UPDATE
      SET held_until = CASE WHEN h.held_until <= now() THEN EXCLUDED.held_until ELSE h.held_until END,
          job_id = CASE WHEN h.held_until <= now() THEN EXCLUDED.job_id ELSE h.job_id END
      RETURNING h.queue_name, h.unique_key, h.job_id
    ), inserted AS (
      -- Phase 2, the inserts, in (queue, key) order. A key with a live holder conflicts and is left to phase 3.
      -- The aggregate reads windows whole before the first insert (an EXISTS would read it row by row, interleaved).
      INSERT INTO background_jobs (id, queue_name, payload, priority, max_attempts, run_at, unique_key, concurrency_key${traced ? ', trace_context' : ''})
      SELECT n.id, i.q, i.p, i.pr, i.ma, coalesce(i.ra, now() + i.d ${MS}), CASE WHEN i.w IS NULL THEN i.k END, i.ck${traced ? ', $11::jsonb' : ''}
      FROM input AS i JOIN ids AS n ON n.ord = i.ord
      WHERE i.w IS NULL OR n.id = ANY (coalesce((SELECT array_agg(x.job_id) FROM windows AS x), '{}')::int8[])
      ORDER BY i.q, i.k
      ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL AND status IN ('queued', 'processing') DO NOTHING
      RETURNING id
    ), holders AS (
      -- Phase 3, the holders that 'replace' and 'keep-run-at' update, locked in (queue, key) order once every
      -- insert is done (the aggregate again), then updated (replaced) once every lock is held.
      SELECT j.id, j.status = 'processing' AS held FROM input AS i JOIN ids AS n ON n.ord = i.ord JOIN background_jobs AS j ON j.queue_name = i.q AND j.unique_key = i.k
      WHERE i.k IS NOT NULL AND i.w IS NULL AND i.mode <> 'keep' AND (j.status = 'queued' OR (j.status = 'processing' AND j.buffered))
        AND n.id <> ALL (coalesce((SELECT array_agg(ins.id) FROM inserted AS ins), '{}')::int8[])
      ORDER BY j.queue_name, j.unique_key
      FOR UPDATE OF j
    ), replaced AS (
      UPDATE background_jobs AS j
      SET payload = i.p, run_at = CASE WHEN i.mode = 'replace' THEN coalesce(i.ra, now() + i.d ${MS}) ELSE j.run_at END, updated_at = now(),
          status = 'queued', buffered = false, lease_expires_at = NULL${traced ? ', trace_context = $11::jsonb' : ''}
      FROM input AS i
      WHERE i.k IS NOT NULL AND i.w IS NULL AND i.mode <> 'keep'
        AND j.queue_name = i.q AND j.unique_key = i.k AND (j.status = 'queued' OR (j.status = 'processing' AND j.buffered))
        AND j.id = ANY ((SELECT array_agg(h.id) FROM holders AS h)::int8[])
      -- held: the row sat in a worker's buffer (as locked by holders): its holder must drop its copy.
      RETURNING j.id, j.queue_name, i.ord, (SELECT h.held FROM holders AS h WHERE h.id = j.id) AS held
    )
    SELECT i.ord, coalesce(ins.id, r.id, x.job_id, live.id) AS id,
      CASE WHEN ins.id IS NOT NULL THEN 'inserted' WHEN r.id IS NOT NULL THEN 'replaced'
           WHEN coalesce(x.job_id, live.id) IS NOT NULL THEN 'duplicate' END AS outcome,
      -- replaced rows may now run sooner than the workers' timers know: wake them (inserts notify by trigger),
      -- unless the wake-up is deferred: the caller wakes the queues of its inserted and replaced rows after commit.
      ${wake === 'deferred' ? '0' : `(SELECT count(pg_notify('${JOBS_CHANNEL}', q.queue_name)) FROM (SELECT DISTINCT queue_name FROM replaced) AS q)`} AS notified,
      -- a replaced row that was read ahead: its holder checks its buffer before it starts anything from it.
      (SELECT count(pg_notify('${REVIEW_CHANNEL}', q.queue_name)) FROM (SELECT DISTINCT queue_name FROM replaced WHERE held) AS q) AS reviewed
    FROM input AS i JOIN ids AS n ON n.ord = i.ord
    LEFT JOIN inserted AS ins ON ins.id = n.id
    LEFT JOIN replaced AS r ON r.ord = i.ord
    LEFT JOIN windows AS x ON i.w IS NOT NULL AND x.queue_name = i.q AND x.unique_key = i.k
    LEFT JOIN LATERAL (
      SELECT h.id FROM background_jobs AS h
      WHERE i.k IS NOT NULL AND i.w IS NULL AND ins.id IS NULL AND r.id IS NULL
        AND h.queue_name = i.q AND h.unique_key = i.k AND h.status IN ('queued', 'processing')
      LIMIT 1
    ) AS live ON true
    ORDER BY i.ord`;
}

export const KEYED_ENQUEUE_SQL = {
  // Jobs with a unique key, any number of rows, planned per call (see insertKeyedJobs above).
  insertKeyedJobs: insertKeyedJobs(false, 'trigger'),
  // The same statement for one row (enqueue, enqueueUnique): prepared, since a one-row call's plan does not
  // depend on array lengths, and planning this statement on every call cost more than running it.
  insertKeyedJob: insertKeyedJobs(false, 'trigger'),
  insertKeyedJobsTraced: insertKeyedJobs(true, 'trigger'),
  insertKeyedJobTraced: insertKeyedJobs(true, 'trigger'),
  insertKeyedJobsWakeDeferred: insertKeyedJobs(false, 'deferred'),
  insertKeyedJobWakeDeferred: insertKeyedJobs(false, 'deferred'),
  insertKeyedJobsTracedWakeDeferred: insertKeyedJobs(true, 'deferred'),
  insertKeyedJobTracedWakeDeferred: insertKeyedJobs(true, 'deferred'),
} as const;
