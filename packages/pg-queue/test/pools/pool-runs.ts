// What both instances of the connection-role suite share (connection-roles-processes.spec.ts, pools-worker.ts):
// the table their handlers record runs in, and the run itself. No library import: the worker's build and Jest
// each load it as it is.
import type pg from 'pg';

/** The suite's table: every run of a handler of queue 'long', in either instance. */
export const POOL_RUNS_TABLE = `
  CREATE TABLE pool_runs (
    id bigserial PRIMARY KEY, job_id int8 NOT NULL, attempt int NOT NULL, worker text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz)`;

/** A run of a job of queue 'long': recorded, then `ms` of work that ignores the job's signal (as a busy handler does). */
export async function recordedRun(records: pg.Pool, worker: string, job: { id: string; attempt: number; payload: { ms: number } }): Promise<void> {
  const { rows } = await records.query<{ id: string }>(`INSERT INTO pool_runs (job_id, attempt, worker) VALUES ($1, $2, $3) RETURNING id`, [job.id, job.attempt, worker]);
  await new Promise((resolve) => setTimeout(resolve, job.payload.ms));
  await records.query(`UPDATE pool_runs SET ended_at = clock_timestamp() WHERE id = $1`, [rows[0].id]);
}

