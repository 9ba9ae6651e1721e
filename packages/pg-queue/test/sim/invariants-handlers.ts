// The simulation's invariants for handler kinds (issue 40): batch handlers (queue `batch`) and transactional
// handlers (queue `txq`). Read from the tables and the run log only, as in invariants.ts.
import type pg from 'pg';
import type { Facts, Run, Violation } from './invariants.js';

const FINAL = ['completed', 'failed', 'cancelled'];
const failed = (r: Run) => r.outcome !== null && (r.outcome.startsWith('threw') || r.outcome === 'slept' || r.outcome.startsWith('abort:'));

/**
 * A transactional job's app row (sim_tx, written through job.manager) exists exactly once if the job completed, and
 * never otherwise: a failed attempt, a timeout, a lost lease, a cancel and a network fault roll it back with the
 * attempt. A pruned job is judged by the status it was deleted with.
 */
export async function transactionalRowsMatch(db: pg.Pool): Promise<Violation[]> {
  const { rows } = await db.query<{ id: string; status: string; n: number; writes: string[] | null }>(
    `WITH jobs AS (
       SELECT id, status::text AS status FROM background_jobs WHERE queue_name = 'txq'
       UNION ALL
       (SELECT DISTINCT ON (t.job_id) t.job_id, t.old_status FROM sim_transitions t
        WHERE t.op = 'delete' AND t.job_id IN (SELECT job_id FROM sim_runs WHERE queue = 'txq') ORDER BY t.job_id, t.id DESC))
     SELECT jobs.id::text, jobs.status, count(x.job_id)::int AS n, array_agg(x.attempt || '/' || x.worker) FILTER (WHERE x.job_id IS NOT NULL) AS writes
     FROM jobs LEFT JOIN sim_tx x ON x.job_id = jobs.id GROUP BY jobs.id, jobs.status ORDER BY jobs.id`,
  );
  const out: Violation[] = [];
  for (const j of rows) {
    const writes = (j.writes ?? []).join(', ') || 'none';
    if (j.n > 1) out.push({ invariant: 'tx.app-row-twice', jobIds: [j.id], detail: `${j.status} with ${j.n} app rows committed (attempt/worker: ${writes})` });
    else if (j.status === 'completed' && j.n === 0) out.push({ invariant: 'tx.completed-without-its-row', jobIds: [j.id], detail: 'completed, but no app row of its handler committed' });
    else if (j.status !== 'completed' && j.n > 0) out.push({ invariant: 'tx.row-without-completion', jobIds: [j.id], detail: `${j.status}, yet its handler's app row committed (attempt/worker: ${writes})` });
  }
  return out;
}

/**
 * Each job of a batch call reaches one final outcome, the one its call gave it: a completed job was completed by a
 * run of the attempt the row charged (its result names that run when the handler completed it on its own), not by
 * a stale call; a job whose every run of that attempt failed it is not completed; a final status never turns into
 * another final status without a retry in between.
 */
export async function batchOutcomes(db: pg.Pool, facts: Facts): Promise<Violation[]> {
  const { rows } = await db.query<{ id: string; status: string; attempts: number; how: string | null; run: string | null; last_error: string | null }>(
    `SELECT id::text, status::text, attempts, payload->>'how' AS how, result->>'run' AS run, last_error FROM background_jobs_all WHERE queue_name = 'batch' AND status IN ('completed', 'failed')`,
  );
  const out: Violation[] = [];
  const runById = new Map(facts.runs.map((r) => [r.id, r]));
  for (const j of rows) {
    const runs = (facts.runsByJob.get(j.id) ?? []).filter((r) => r.attempt === j.attempts && !facts.held.has(`${r.job_id}/${r.attempt}/${r.worker}`));
    if (j.status === 'completed') {
      if (j.run !== null) {
        const run = runById.get(j.run);
        if (!run || run.job_id !== j.id || run.attempt !== j.attempts) {
          out.push({ invariant: 'batch.completed-by-a-stale-call', jobIds: [j.id], detail: `completed at ${j.attempts} attempts with the result of run ${j.run} (${run ? `job ${run.job_id} attempt ${run.attempt} on ${run.worker}` : 'not in the run log'})` });
        }
      } else if (j.how === 'complete' && runs.some((r) => r.outcome === 'ok')) {
        out.push({ invariant: 'batch.result-lost', jobIds: [j.id], detail: `completed by job.complete(result) at ${j.attempts} attempts, but the row has no result` });
      }
      // Every run of the charged attempt, held ones too: a snooze is uncharged, so the run after it has the same
      // attempt, and a run a fault held may still have completed the job (seed 32, job 2615: snoozed on e.1, then
      // completed on w1.5 just before a cut).
      const ofAttempt = (facts.runsByJob.get(j.id) ?? []).filter((r) => r.attempt === j.attempts);
      if (ofAttempt.length > 0 && ofAttempt.every(failed)) {
        out.push({ invariant: 'batch.completed-though-failed', jobIds: [j.id], detail: `completed at ${j.attempts} attempts, but every run of that attempt failed it: ${ofAttempt.map((r) => `${r.worker} ${r.outcome ?? 'no end'}`).join(', ')}` });
      }
    } else if (runs.length > 0 && runs.every((r) => r.outcome === 'ok') && !/timed out|lease/.test(j.last_error ?? '')) {
      out.push({ invariant: 'batch.failed-though-completed', jobIds: [j.id], detail: `failed at ${j.attempts} attempts (${(j.last_error ?? '').slice(0, 120)}), but its call completed it: ${runs.map((r) => r.worker).join(', ')}` });
    }
  }
  const batchJobs = new Set(facts.runs.filter((r) => r.queue === 'batch').map((r) => r.job_id));
  for (const t of facts.transitions) {
    if (batchJobs.has(t.job_id) && t.op === 'update' && FINAL.includes(t.old_status ?? '') && FINAL.includes(t.new_status ?? '') && t.old_status !== t.new_status) {
      out.push({ invariant: 'batch.final-outcome-changed', jobIds: [t.job_id], detail: `${t.old_status} became ${t.new_status} at ${t.at.toISOString()} with no retry between` });
    }
  }
  return out;
}

/**
 * A completed job holds what its handler returned: every handler but the batch and thread ones (their results name the
 * run or the thread: batchOutcomes, threadOutcomes) returns `{ n }` of the payload it
 * ran with (sim-worker.ts), and a running job's payload never changes, so a completed row's result is `{ n }` of its
 * payload; a completion with completedRetentionMs 0 deletes plain jobs with their results, but keeps a flow's job and
 * its result, which its children read (job.parents()).
 */
export async function resultsKept(db: pg.Pool): Promise<Violation[]> {
  const { rows } = await db.query<{ id: string; queue: string; result: unknown; n: unknown }>(
    `SELECT id::text, queue_name AS queue, result, payload -> 'n' AS n FROM background_jobs_all
     WHERE status = 'completed' AND queue_name NOT IN ('batch', 'cpu') AND payload ? 'n' AND result IS DISTINCT FROM jsonb_build_object('n', payload -> 'n')
     ORDER BY id`,
  );
  return rows.map((r) => ({ invariant: 'results.not-kept', jobIds: [r.id], detail: `completed (${r.queue}) with result ${JSON.stringify(r.result)}; its handler returned {"n":${JSON.stringify(r.n)}}` }));
}

/**
 * Thread handlers (queue `cpu`, sim-cpu.thread.ts writes its own runs): a completed job was completed by its thread
 * (its result carries the thread's id, never 0, the main thread's) and by a run of the attempt the row charged that
 * ended well; a failure the thread threw reaches last_error readably (the Error's message, a non-Error's value).
 */
export async function threadOutcomes(db: pg.Pool, facts: Facts): Promise<Violation[]> {
  const { rows } = await db.query<{ id: string; status: string; attempts: number; thread: number | null; last_error: string | null }>(
    `SELECT id::text, status::text, attempts, (result->>'thread')::int AS thread, last_error FROM background_jobs_all WHERE queue_name = 'cpu' AND status IN ('completed', 'failed')`,
  );
  const out: Violation[] = [];
  for (const j of rows) {
    const runs = (facts.runsByJob.get(j.id) ?? []).filter((r) => r.attempt === j.attempts);
    if (j.status === 'completed') {
      if (!j.thread) out.push({ invariant: 'thread.completed-off-its-thread', jobIds: [j.id], detail: `completed at ${j.attempts} attempts with a result that names no worker thread (thread ${j.thread})` });
      if (!runs.some((r) => r.outcome === 'ok')) {
        out.push({ invariant: 'thread.completed-without-its-run', jobIds: [j.id], detail: `completed at ${j.attempts} attempts, but no run of that attempt ended well: ${runs.map((r) => `${r.worker} ${r.outcome ?? 'no end'}`).join(', ') || 'no run'}` });
      }
      continue;
    }
    // A sweep ended the last attempt (its process was killed or stopped before the thread's failure was written): the
    // runs invariants judge that; the error the row holds is the sweeper's (seed 989321333, job 1797).
    if ((j.last_error ?? '').startsWith('lease expired:')) continue;
    const last = runs[runs.length - 1];
    const expected = last?.outcome === 'threw:junk' ? 'non-Error value' : last?.outcome === 'threw:planned failure' ? 'planned failure' : undefined;
    if (expected && runs.every((r) => r.outcome === last.outcome) && !(j.last_error ?? '').includes(expected)) {
      out.push({ invariant: 'thread.error-unreadable', jobIds: [j.id], detail: `failed after its thread's ${last.outcome}, but last_error says ${JSON.stringify((j.last_error ?? '').slice(0, 160))}` });
    }
  }
  return out;
}
