// The simulation's invariant for the rate limit of queue `rated` (issue 40), read from the trigger-kept
// sim_transitions: a start is a claim (queued -> processing; the queue reads nothing ahead and never starts eagerly).
import type pg from 'pg';
import type { Violation } from './invariants.js';

/**
 * Starts of queue `rated` in any window of `intervalMs`, all processes together, never exceed `max` (README,
 * "Limits": a sliding window of the claims). Timed by the claim statement's statement_timestamp(), the clock the
 * limited claim counts by (claim.sql.ts); the trigger's own clock_timestamp() runs later by the statement's work,
 * which could pull two starts a window apart into one. A claim whose jobs went back unstarted (it came back late)
 * still counts, as it does for the limit.
 */
export async function rateLimitHeld(db: pg.Pool, limit: { max: number; intervalMs: number }): Promise<Violation[]> {
  const { rows } = await db.query<{ job_id: string; at: Date; by: string | null }>(
    `SELECT t.job_id::text, t.stmt_at AS at, t.new_locked_by AS by FROM sim_transitions t
     WHERE t.op = 'update' AND t.old_status = 'queued' AND t.new_status = 'processing'
       AND t.job_id IN (SELECT job_id FROM sim_enqueues WHERE kind = 'rated')
     ORDER BY t.stmt_at, t.id`,
  );
  const out: Violation[] = [];
  // The earliest start of each window of max + 1 starts: a violation when the last of them is within intervalMs.
  for (let i = 0; i + limit.max < rows.length; i++) {
    const first = rows[i];
    const last = rows[i + limit.max];
    const spanMs = last.at.getTime() - first.at.getTime();
    if (spanMs < limit.intervalMs) {
      const inWindow = rows.slice(i, i + limit.max + 1);
      out.push({
        invariant: 'limits.rate',
        jobIds: inWindow.map((r) => r.job_id),
        detail: `${inWindow.length} starts within ${spanMs} ms (limit ${limit.max} per ${limit.intervalMs} ms) from ${first.at.toISOString()}: ${inWindow.map((r) => `${r.job_id} by ${r.by}`).join(', ')}`,
      });
      // One report per crowded stretch: skip past it.
      i += limit.max;
    }
  }
  return out;
}
