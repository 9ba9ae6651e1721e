// The SQL of durable steps (docs/guides/durable-steps.md): what job.step() and job.sleep() read and write. All
// times from the database clock.

export const STEP_SQL = {
  // The steps a job recorded, read once per attempt at its first step (not with the claim: a job that records
  // none pays nothing), with the database's clock for the sleeps (a sleep is over when now() passes its `until`).
  loadSteps: `SELECT steps, (extract(epoch FROM now()) * 1000)::float8 AS now_ms FROM background_jobs WHERE id = $1`,

  // A step's record, appended to the job's steps ($4: {"name", "result"?} as JSON; $5: a sleep's ms, or NULL),
  // fenced like an outcome: only the claim that holds the job ($2 worker, $3 token) may record, and only while it
  // runs (a cancelled, swept or replaced row refuses it). The row lock makes the check and the append one step, so
  // the sweeper cannot take the job between them. A job started from a read-ahead buffer whose row does not know it
  // yet is marked started and charged, as a heartbeat would: it has run. `attempt` is the attempt that recorded it.
  recordStep: `
    UPDATE background_jobs AS j
    SET steps = coalesce(j.steps, '[]'::jsonb) || jsonb_build_array($4::jsonb
          || jsonb_build_object('attempt', j.attempts + j.buffered::int, 'at', now())
          || CASE WHEN $5::int8 IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('until', now() + $5::int8 * interval '1 millisecond') END),
        attempts = j.attempts + j.buffered::int, buffered = false
    WHERE j.id = $1 AND j.status = 'processing' AND j.locked_by = $2 AND j.fence_token = $3::int8
    RETURNING (extract(epoch FROM now()) * 1000)::float8 AS now_ms`,
} as const;
