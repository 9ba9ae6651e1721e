import type pg from 'pg';

/** The suite's own tables, next to background_jobs: every handler run, and every fault injected. */
export async function createFaultTables(db: pg.Pool): Promise<void> {
  await db.query(`
    CREATE TABLE fault_runs (
      id          bigserial PRIMARY KEY,
      job_id      bigint NOT NULL,
      queue       text NOT NULL,
      attempt     int NOT NULL,
      worker      text NOT NULL,
      pid         int NOT NULL,
      started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
      finished_at timestamptz,
      result      text
    );
    CREATE INDEX fault_runs_job_idx ON fault_runs (job_id);
    CREATE TABLE fault_faults (
      worker text NOT NULL,
      pid    int NOT NULL,
      signal text NOT NULL,
      at     timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    -- The jobs a worker held (claimed, outcome not written) and had started when a fault hit it: the only runs
    -- allowed to be redone (a job only read ahead, never started, is not in flight: its first run is elsewhere).
    CREATE TABLE fault_held (
      worker  text NOT NULL,
      job_id  bigint NOT NULL,
      attempt int NOT NULL
    );
    -- The jobs inserted already claimed (eager start: enqueued in the process of a worker with a free slot).
    CREATE TABLE fault_eager (job_id bigint NOT NULL, worker text NOT NULL);
    -- What reached a worker process's uncaughtException / unhandledRejection (the process then exits, as it
    -- would without a listener): nothing a handler does may get there.
    CREATE TABLE fault_crashes (
      worker text NOT NULL,
      pid    int NOT NULL,
      event  text NOT NULL,
      error  text NOT NULL,
      at     timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE FUNCTION fault_eager_record() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO fault_eager (job_id, worker) SELECT id, locked_by FROM new_jobs WHERE status = 'processing';
      RETURN NULL;
    END $$;
    CREATE TRIGGER fault_eager_record AFTER INSERT ON background_jobs REFERENCING NEW TABLE AS new_jobs
      FOR EACH STATEMENT EXECUTE FUNCTION fault_eager_record()`);
}

export async function statusCounts(db: pg.Pool, queue: string): Promise<Record<string, number>> {
  const { rows } = await db.query<{ status: string; n: number }>(
    `SELECT status::text, count(*)::int AS n FROM background_jobs WHERE queue_name = $1 GROUP BY 1 ORDER BY 1`,
    [queue],
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

export async function countWhere(db: pg.Pool, sql: string, values: unknown[] = []): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM (${sql}) AS q`, values);
  return rows[0].n;
}

export interface RunAudit {
  jobs: number;
  completed: number;
  /** Enqueued but not completed at the end. */
  lost: number;
  /** Completed, yet no run of that attempt on that worker (locked_by) was recorded: an outcome without its run. */
  completedWithoutRun: number;
  /** Jobs whose handler ran more than once. */
  ranTwice: number;
  /** Of those, earlier runs not explained by a fault: their worker had not started the job, or did not hold it, when a SIGKILL, SIGSTOP or restart hit it. */
  unexplained: { jobId: string; why: string }[];
  /** Of those, jobs whose outcome is not the final attempt's, or whose attempt ran twice: fencing failed. */
  unfenced: { jobId: string; why: string }[];
  runs: number;
}

interface MultiRunRow {
  id: string;
  status: string;
  attempts: number;
  locked_by: string | null;
  runs: { attempt: number; worker: string }[];
}

/**
 * Reads back one queue's jobs and runs: every job completed, and every job that ran more than once did so
 * because a fault hit the worker of its earlier run(s) while the run was in flight, and the completion
 * belongs to the final attempt's owner (the fenced-out runs recorded nothing).
 */
export async function auditRuns(db: pg.Pool, queue: string): Promise<RunAudit> {
  const { rows: [totals] } = await db.query<{ jobs: number; completed: number; runs: number; without_run: number }>(
    `SELECT count(*)::int AS jobs,
            count(*) FILTER (WHERE status = 'completed')::int AS completed,
            (SELECT count(*)::int FROM fault_runs WHERE queue = $1) AS runs,
            count(*) FILTER (WHERE status = 'completed' AND NOT EXISTS (
              SELECT 1 FROM fault_runs r WHERE r.job_id = j.id AND r.attempt = j.attempts AND r.worker = j.locked_by))::int AS without_run
     FROM background_jobs j WHERE queue_name = $1`,
    [queue],
  );
  const { rows: multi } = await db.query<MultiRunRow>(
    `SELECT j.id::text, j.status::text, j.attempts, j.locked_by,
            json_agg(json_build_object('attempt', r.attempt, 'worker', r.worker) ORDER BY r.attempt, r.started_at) AS runs
     FROM background_jobs j JOIN fault_runs r ON r.job_id = j.id
     WHERE j.queue_name = $1
     GROUP BY j.id HAVING count(*) > 1`,
    [queue],
  );
  const { rows: held } = await db.query<{ key: string }>(`SELECT job_id || '/' || attempt || '/' || worker AS key FROM fault_held`);
  const heldAtFault = new Set(held.map((h) => h.key));
  const unexplained: RunAudit['unexplained'] = [];
  const unfenced: RunAudit['unfenced'] = [];
  for (const job of multi) {
    // Runs of one attempt number are ordered by when their fault_runs row was written, which is not when they
    // started when a run began just before its worker was frozen: its row is written on SIGCONT, after the run
    // that took the job over. The run whose outcome the row holds (its attempt, its worker) is the last one.
    const final = job.runs.findIndex((run) => run.attempt === job.attempts && run.worker === job.locked_by);
    if (final >= 0) {
      const [won] = job.runs.splice(final, 1);
      const after = job.runs.findIndex((run) => run.attempt > won.attempt);
      job.runs.splice(after < 0 ? job.runs.length : after, 0, won);
    }
    const last = job.runs[job.runs.length - 1];
    // One attempt number twice: the claim of the second run did not fence the first, unless the first run was
    // cut by a fault before its start reached the row (a job started from a read-ahead buffer is charged its
    // attempt within a heartbeat tick; killed before that, it goes back uncharged and runs again as that attempt).
    const explained = (run: { attempt: number; worker: string }) => heldAtFault.has(`${job.id}/${run.attempt}/${run.worker}`);
    const repeated = job.runs.filter((run, i) => job.runs.slice(i + 1).some((later) => later.attempt === run.attempt) && !explained(run));
    if (repeated.length > 0) unfenced.push({ jobId: job.id, why: `one attempt ran twice: ${job.runs.map((r) => `${r.attempt} on ${r.worker}`).join(', ')}` });
    for (const run of job.runs.slice(0, -1)) {
      if (!explained(run)) {
        unexplained.push({ jobId: job.id, why: `attempt ${run.attempt} on ${run.worker} was redone, but no fault hit that worker while it had started the job and held it` });
      }
    }
    if (job.status !== 'completed' || job.attempts !== last.attempt || job.locked_by !== last.worker) {
      unfenced.push({ jobId: job.id, why: `ended ${job.status} at attempt ${job.attempts} by ${job.locked_by}, last run was attempt ${last.attempt} on ${last.worker}` });
    }
  }
  return {
    jobs: totals.jobs,
    completed: totals.completed,
    lost: totals.jobs - totals.completed,
    completedWithoutRun: totals.without_run,
    ranTwice: multi.length,
    unexplained,
    unfenced,
    runs: totals.runs,
  };
}
