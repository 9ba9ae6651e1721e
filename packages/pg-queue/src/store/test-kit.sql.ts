// The statements of the testing kit (nestjs-pg-queue/testing) only: the library's main entry never loads
// this file. The kit claims and settles jobs with JobStore's own statements (job.sql.ts), so that fencing,
// retries and dead letters behave as in production; these only move time and read back what was enqueued.
// $1 is a list of queue names, or NULL for every queue.

const MS = `* interval '1 millisecond'`;

export const TEST_KIT_SQL = {
  // The database clock is the queue's clock (claims compare run_at with now()), so time moves by shifting
  // the rows, not by faking Date in the app. Only jobs not yet due move; retries and snoozes are queued rows too.
  advanceQueuedJobs: `
    UPDATE background_jobs
    SET run_at = run_at - $2::int8 ${MS}, updated_at = now()
    WHERE status = 'queued' AND run_at > now() AND ($1::text[] IS NULL OR queue_name = ANY($1::text[]))`,

  makeQueuedJobsDue: `
    UPDATE background_jobs
    SET run_at = now(), updated_at = now()
    WHERE status = 'queued' AND run_at > now() AND ($1::text[] IS NULL OR queue_name = ANY($1::text[]))`,

  // Every column get(id) reads (result, progress, flow, steps...), so the kit's records are get()'s. `buffered`: a job
  // in a worker's read-ahead buffer reads as queued (toJobRecord).
  listJobs: `
    SELECT * FROM background_jobs_all
    WHERE $1::text[] IS NULL OR queue_name = ANY($1::text[])
    ORDER BY id`,

  // Between tests: every job, every uniqueForMs window, every waiting successor's row and every paused flag goes, in one transaction.
  deleteAllJobs: `
    WITH jobs AS (DELETE FROM background_jobs RETURNING 1), moved AS (DELETE FROM background_jobs_history RETURNING 1), keys AS (DELETE FROM background_job_keys RETURNING 1),
      queues AS (DELETE FROM background_queues RETURNING 1), attempts AS (DELETE FROM background_job_attempts RETURNING 1),
      successors AS (DELETE FROM background_job_successors RETURNING 1)
    SELECT ((SELECT count(*) FROM jobs) + (SELECT count(*) FROM moved))::int AS deleted`,

  scheduleNames: `SELECT name FROM background_schedules ORDER BY name`,
} as const;
