// What the reports of job states (stats(), the dashboard, metrics, checkLag, the command line, the testing kit)
// call a row. A buffered job is a row in status 'processing' with buffered = true: claimed into a worker's
// read-ahead buffer, not started, not charged an attempt (docs/concepts.md, The life of a held job). Every
// report counts it as waiting ('queued'), never as running. Reading `buffered` costs a heap read of the row:
// reports reach 'processing' rows through the in-flight index (locked_by, id) WHERE status = 'processing',
// and those rows are few.

/** The most in-flight rows a lag read looks at (through the in-flight index) for buffered jobs' run_at. */
export const IN_FLIGHT_READ = 10_000;

/** The status a report shows for row `j`: 'queued' for a buffered job, else its status. */
export function shownStatus(j: string): string {
  return `(CASE WHEN ${j}.status = 'processing' AND ${j}.buffered THEN 'queued'::background_job_status ELSE ${j}.status END)`;
}

/**
 * Row `j`'s shown status is one of `statuses` (an SQL expression of type background_job_status[]). Written as a
 * test of `status` itself, with `buffered` only beside 'processing', so that a planner given one status still
 * sees `status = ...` (and its partial indexes) as before.
 */
export function shownStatusIn(j: string, statuses: string): string {
  return `((${j}.status = ANY(${statuses}) AND NOT (${j}.status = 'processing' AND ${j}.buffered))
        OR ('queued' = ANY(${statuses}) AND ${j}.status = 'processing' AND ${j}.buffered))`;
}

/**
 * Per queue, the earliest run_at of its buffered jobs (rows queue_name, run_at): they are due and waiting, so
 * they count in a queue's lag. The in-flight rows are read through the in-flight index, at most `limit`
 * (an SQL expression) of them, before `buffered` is tested: the read is bounded whatever the rows hold.
 */
export function bufferedHeads(limit: string): string {
  return `
      SELECT p.queue_name, min(p.run_at) AS run_at
      FROM (SELECT queue_name, run_at, buffered FROM background_jobs WHERE status = 'processing' ORDER BY locked_by, id LIMIT ${limit}) AS p
      WHERE p.buffered GROUP BY p.queue_name`;
}
