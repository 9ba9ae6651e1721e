// The simulation's invariant for QueueService.waitFor (issue 40): what it answered the enqueuing process (sim_waits)
// matches the job's row, read from its history (sim_transitions) and its final row (background_jobs).
import type pg from 'pg';
import type { Violation } from './invariants.js';

/**
 * waitFor answers a job's result only once the job completed, and with the row's result; a failure only once the
 * job reached that final status (a failed attempt with attempts left keeps it waiting); a timeout (150 s) only while
 * the job was not final yet; never an error. It answers soon: the statement that completes, dead-letters or cancels an awaited job sends a notice
 * (README, "Waiting for a job"), and the enqueuing process's LISTEN is never faulted, so an answer more than 5 s
 * after the job first finished, less what held the waiting process (its event loop's lags, the machine's stalls, a restart of PostgreSQL,
 * an operator's lock wait that took its API pool), is
 * `wait.not-woken`; past the waiters' 30 s poll it is `wait.never-answered`. A wait
 * still pending when its process shut down ("the application is shutting down"), or whose job the prune deleted
 * first ("the job's row is gone"), is judged as unanswered then. An
 * operator's retry after the answer changes the row, not the answer: the answer is judged by the history up to it.
 */
export async function waitsMatchRows(db: pg.Pool, until: string): Promise<Violation[]> {
  const { rows } = await db.query<{
    job_id: string; answer: string | null; status: string | null; result: unknown; answered_at: Date | null;
    row_status: string | null; row_result: unknown; reached: boolean; final_before: Date | null; deleted_awaited: boolean | null;
  }>(
    `SELECT w.job_id::text, w.answer, w.status, w.result, w.answered_at, j.status::text AS row_status, j.result AS row_result,
       EXISTS (SELECT 1 FROM sim_transitions t WHERE t.job_id = w.job_id AND t.op = 'update'
                 AND t.new_status = CASE w.answer WHEN 'result' THEN 'completed' ELSE w.status END AND t.at <= w.answered_at) AS reached,
       (SELECT min(t.at) FROM sim_transitions t WHERE t.job_id = w.job_id AND t.op = 'update'
          AND t.new_status IN ('completed', 'failed', 'cancelled')) AS final_before,
       (SELECT bool_or(t.deleted_awaited) FROM sim_transitions t WHERE t.job_id = w.job_id AND t.op = 'delete') AS deleted_awaited
     FROM sim_waits w LEFT JOIN background_jobs j ON j.id = w.job_id ORDER BY w.job_id`,
  );
  const { rows: end } = await db.query<{ until: Date }>('SELECT $1::timestamptz AS until', [until]);
  // What held the waiting process (the enqueuing slot 'e', the only one that waits) or the whole machine: its event
  // loop's lags and the machine's stalls, each recorded at its end. A notice that arrived while the loop was held is
  // read when it is free again; that lateness is the machine's, not the notice's.
  const { rows: held } = await db.query<{ at: Date; ms: number }>(
    `SELECT at, lag_ms AS ms FROM sim_lags WHERE split_part(worker, '.', 1) = 'e'
     UNION ALL SELECT at, NULL FROM fault_faults WHERE signal = 'STALL'`,
  );
  // The operator's lock wait on slot 'e' (issue 39 item 5): the app's own enqueues of a key another transaction holds
  // take every connection of its API pool for the hold, and the waiters read the awaited jobs with that pool. Their
  // answers wait for the hold, as every API call of that app does (CI's seed 989321333: 9 answers 6.0-6.6 s late).
  const { rows: lockWaits } = await db.query<{ from_at: Date; until_at: Date }>(
    `SELECT t0 AS from_at, t1 AS until_at FROM sim_ops WHERE op = 'lock-wait' AND detail ->> 'slot' = 'e' AND t1 IS NOT NULL`,
  );
  // A restart of PostgreSQL: the waiting process could not read the job until it could log in again, and its reads
  // are tried again with backoff (doubling): the part of the outage after the finish counts twice.
  const { rows: outages } = await db.query<{ from_at: Date; until_at: Date }>('SELECT from_at, until_at FROM sim_outages');
  const heldMs = (from: Date, to: number) =>
    held.filter((h) => h.at.getTime() >= from.getTime() && h.at.getTime() <= to + 1_000).reduce((sum, h) => sum + (h.ms ?? Infinity), 0) +
    outages
      .filter((o) => o.from_at.getTime() <= to && o.until_at.getTime() >= from.getTime())
      .reduce((sum, o) => sum + 2 * (o.until_at.getTime() - Math.max(o.from_at.getTime(), from.getTime())), 0) +
    lockWaits
      .filter((o) => o.from_at.getTime() <= to && o.until_at.getTime() >= from.getTime())
      .reduce((sum, o) => sum + (o.until_at.getTime() - Math.max(o.from_at.getTime(), from.getTime())), 0);
  const out: Violation[] = [];
  const NOTICE_MS = 5_000;
  const POLL_MS = 30_000;
  for (const w of rows) {
    const said = `waitFor answered ${w.answer ?? 'nothing'}${w.status ? ` (${w.status})` : ''}${w.answer === 'result' || w.answer === 'error' ? ` ${JSON.stringify(w.result)}` : ''}`;
    // Cut by shutdown, or by the prune (5 s retention) deleting a job whose finish the waiter had not heard of: the
    // wait was unanswered until then (seed 35: bulk-cancelled jobs pruned before the waiters' poll).
    const shutDown = w.answer === 'error' && /shutting down|row is gone/.test(JSON.stringify(w.result));
    // A completion with completedRetentionMs 0 keeps the row of a job waitFor marked (settle.sql.ts, deletion()): its
    // waiter reads the result from it. Deleted, the waiter answered null, or "the job's row is gone" (seed 52).
    if (w.deleted_awaited) {
      out.push({ invariant: 'wait.awaited-row-deleted', jobIds: [w.job_id], detail: `${said}; the completion deleted the row although waitFor had marked it` });
      continue;
    }
    if (w.answer === null || shutDown) {
      // Unanswered until the end (the drain's, or the shutdown that cut the wait).
      const endMs = shutDown && w.answered_at ? w.answered_at.getTime() : end[0].until.getTime();
      const waitedMs = w.final_before === null ? 0 : endMs - w.final_before.getTime();
      if (waitedMs > NOTICE_MS && waitedMs - heldMs(w.final_before!, endMs) > NOTICE_MS) {
        out.push({
          invariant: waitedMs > POLL_MS ? 'wait.never-answered' : 'wait.not-woken',
          jobIds: [w.job_id],
          detail: `the job first finished (${w.row_status ?? 'pruned'} now) at ${w.final_before!.toISOString()}; ${waitedMs} ms later waitFor had not answered${shutDown ? ` (then: ${String(w.result).slice(0, 80)})` : ''}`,
        });
      }
    } else if (w.answer === 'timeout') {
      // A timeout is right when the job was still not final as the wait gave up (seed 41: a job enqueued before a
      // restart behind PgBouncer finished for good 171 s later); wrong when it had finished and no notice or poll told
      // the waiter in time.
      const missedMs = w.final_before === null || w.answered_at === null ? 0 : w.answered_at.getTime() - w.final_before.getTime();
      if (missedMs > NOTICE_MS && missedMs - heldMs(w.final_before!, w.answered_at!.getTime()) > NOTICE_MS) {
        out.push({ invariant: 'wait.timed-out', jobIds: [w.job_id], detail: `${said} at ${w.answered_at!.toISOString()}, ${missedMs} ms after the job first finished; the job's row is ${w.row_status ?? 'pruned'}` });
      }
    } else if (w.answer === 'error') {
      // Deleted as it completed (completedRetentionMs 0), unwatched: the waitFor came after, and found no row. Its error
      // says so (README, "Waiting for a job"; the simulation's seed 52: completed 17 ms after its enqueue).
      const deletedFirst = w.deleted_awaited === false && w.row_status === null && /no such job/.test(JSON.stringify(w.result));
      if (!deletedFirst) out.push({ invariant: 'wait.threw', jobIds: [w.job_id], detail: `${said}; the job's row is ${w.row_status ?? 'pruned'}` });
    } else if (!w.reached) {
      out.push({ invariant: 'wait.answered-before-the-job-finished', jobIds: [w.job_id], detail: `${said} at ${w.answered_at?.toISOString()}, but the job had not reached that status then (row now ${w.row_status ?? 'pruned'})` });
    } else if (w.answer === 'result' && w.row_status === 'completed' && JSON.stringify(w.row_result ?? null) !== JSON.stringify(w.result)) {
      out.push({ invariant: 'wait.result-differs', jobIds: [w.job_id], detail: `${said}, the row's result is ${JSON.stringify(w.row_result)}` });
    } else if (w.final_before !== null && w.answered_at !== null && w.answered_at.getTime() - w.final_before.getTime() - heldMs(w.final_before, w.answered_at.getTime()) > NOTICE_MS) {
      out.push({ invariant: 'wait.not-woken', jobIds: [w.job_id], detail: `${said} at ${w.answered_at.toISOString()}, ${w.answered_at.getTime() - w.final_before.getTime()} ms after the job first finished` });
    }
  }
  return out;
}
