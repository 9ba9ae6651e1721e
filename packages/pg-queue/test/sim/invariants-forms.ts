// The simulation's invariant for the dashboard's "Add a job" form (issue 44; operator.ts 'add-job'), read from the
// tables: the job the form added holds what the form asked (queue, max attempts, LIFO), wherever it is now.
import type pg from 'pg';
import type { Violation } from './invariants.js';

export async function addedJobsAsAsked(db: pg.Pool): Promise<Violation[]> {
  const { rows } = await db.query<{ id: string; form: Record<string, string>; queue_name: string | null; max_attempts: number | null; lifo: boolean | null }>(
    `SELECT o.job_ids[1]::text AS id, o.detail -> 'form' AS form, j.queue_name, j.max_attempts, j.lifo
     FROM sim_ops AS o LEFT JOIN background_jobs_all AS j ON j.id = o.job_ids[1]
     WHERE o.op = 'add-job'`,
  );
  const out: Violation[] = [];
  for (const r of rows) {
    if (r.queue_name === null) continue; // pruned or deleted since: the other invariants say whether it ran
    const want = { queue: r.form.queue, maxAttempts: Number(r.form.maxAttempts), lifo: r.form.lifo === '1' };
    const got = { queue: r.queue_name, maxAttempts: r.max_attempts, lifo: r.lifo === true };
    if (JSON.stringify(want) !== JSON.stringify(got)) out.push({ invariant: 'add-job.as-asked', jobIds: [r.id], detail: `the form asked ${JSON.stringify(want)}, the row holds ${JSON.stringify(got)}` });
  }
  return out;
}
