// The simulation's invariants for job logs (issue 43): read from the tables only, as in invariants.ts. Handlers log
// lines that name their run (sim-worker.ts, logLines: `r<run id> a<attempt> <i>`), so each line a job holds can be tied
// to the run log.
import type pg from 'pg';
import type { Violation } from './invariants.js';

/** What storableText appends to a line cut at maxLineLength. */
const CUT_MARKER = '... [truncated]';
const LINE = /^r(\d+) a(\d+) (\d+)/;

/**
 * Every line a finished job holds was logged by a run of that job, of the attempt the line records (the row's count and
 * the handler's own), at most once (a write sent twice lands once), in the order that run logged them; no job holds
 * more than maxLines lines, no line is longer than maxLineLength (and a cut line says so), and the count of lines
 * ever logged is at least the lines held.
 */
export async function logsBelongToRuns(db: pg.Pool, bounds: { maxLines: number; maxLineLength: number }): Promise<Violation[]> {
  const { rows: jobs } = await db.query<{ id: string; status: string; logs: { lines?: { attempt: number; at: string; line: string }[]; total?: number } }>(
    `SELECT id::text, status::text, logs FROM background_jobs_all WHERE logs IS NOT NULL AND status IN ('completed', 'failed', 'cancelled') ORDER BY id`,
  );
  const { rows: runs } = await db.query<{ id: string; job_id: string; attempt: number }>(`SELECT id::text, job_id::text, attempt FROM sim_runs`);
  const runById = new Map(runs.map((r) => [r.id, r]));
  const out: Violation[] = [];
  const report = (invariant: string, id: string, detail: string) => out.push({ invariant, jobIds: [id], detail });
  for (const job of jobs) {
    const lines = job.logs.lines ?? [];
    if (lines.length > bounds.maxLines) report('logs.over-the-bound', job.id, `${job.status} with ${lines.length} lines, bound ${bounds.maxLines}`);
    if (!(Number(job.logs.total) >= lines.length)) report('logs.total-short', job.id, `${lines.length} lines held, ${String(job.logs.total)} ever logged`);
    const seen = new Set<string>();
    const lastOfRun = new Map<string, number>();
    for (const l of lines) {
      if (l.line.length > bounds.maxLineLength + CUT_MARKER.length || (l.line.length > bounds.maxLineLength && !l.line.endsWith(CUT_MARKER))) {
        report('logs.line-too-long', job.id, `a line of ${l.line.length} characters, bound ${bounds.maxLineLength}: ${JSON.stringify(l.line.slice(0, 80))}`);
      }
      const m = LINE.exec(l.line);
      if (!m) {
        report('logs.line-of-no-run', job.id, `a line no handler of the simulation writes: ${JSON.stringify(l.line.slice(0, 80))}`);
        continue;
      }
      const [, runId, attempt, i] = m;
      const run = runById.get(runId);
      if (!run || run.job_id !== job.id) {
        report('logs.line-of-no-run', job.id, `line ${i} of run ${runId}, which ${run ? `ran job ${run.job_id}` : 'is not in the run log'}`);
        continue;
      }
      if (run.attempt !== l.attempt || Number(attempt) !== l.attempt) {
        report('logs.wrong-attempt', job.id, `line ${i} of run ${runId} (attempt ${run.attempt}, the handler saw ${attempt}) recorded as attempt ${l.attempt}`);
      }
      const key = `${runId}/${i}`;
      if (seen.has(key)) report('logs.line-twice', job.id, `line ${i} of run ${runId} is held twice`);
      seen.add(key);
      if ((lastOfRun.get(runId) ?? 0) >= Number(i)) report('logs.out-of-order', job.id, `line ${i} of run ${runId} after its line ${lastOfRun.get(runId)}`);
      lastOfRun.set(runId, Number(i));
    }
  }
  return out;
}
