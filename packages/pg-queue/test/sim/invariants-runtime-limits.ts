// The simulation's invariants for limits changed at runtime and by a handler's 429 (issue 42, part 2), on queue `lim`,
// read from sim_queue_changes (a trigger on background_queues: every change of its limits or block, database clock)
// and sim_transitions (every claim).
import type pg from 'pg';
import type { Violation } from './invariants.js';

/** How long a change takes to be in force in every process at most (README: "within a second"). */
export const LIMIT_PROPAGATION_MS = 1_000;
/** A claim whose snapshot came before a block's commit may still take jobs a few milliseconds after it. */
const IN_FLIGHT_MS = 150;

/**
 * The global concurrency of queue `lim` allowed at each instant: its row's override over the decorator's `plain`
 * (absent: the decorator's; JSON null: none), and around a change the larger of the old and new, for the second the
 * change takes to reach every process.
 */
export async function globalLimitOf(db: pg.Pool, plain: number): Promise<(atMs: number) => number> {
  const { rows } = await db.query<{ at: Date; limits: Record<string, unknown> | null }>(`SELECT at, limits FROM sim_queue_changes WHERE queue = 'lim' ORDER BY at`);
  const periods: { from: number; limit: number }[] = [{ from: -Infinity, limit: plain }];
  for (const r of rows) {
    const limits = r.limits ?? {};
    const limit = !('globalConcurrency' in limits) ? plain : limits.globalConcurrency === null ? Infinity : Number(limits.globalConcurrency);
    if (limit !== periods[periods.length - 1].limit) periods.push({ from: r.at.getTime(), limit });
  }
  return (atMs) => {
    let most = 0;
    for (let i = 0; i < periods.length; i++) {
      const to = i + 1 < periods.length ? periods[i + 1].from + LIMIT_PROPAGATION_MS : Infinity;
      if (periods[i].from <= atMs && atMs < to) most = Math.max(most, periods[i].limit);
    }
    return most;
  };
}

/** No job of queue `lim` is claimed inside a block of a partner's 429 (RateLimitedError), all processes together. */
export async function rateLimitedBlocks(db: pg.Pool): Promise<Violation[]> {
  const { rows } = await db.query<{ job_id: string; at: Date; by: string | null; from_at: Date; until: Date }>(
    `SELECT t.job_id::text, t.stmt_at AS at, t.new_locked_by AS by, b.at AS from_at, b.blocked_until AS until
     FROM sim_queue_changes AS b
     JOIN sim_transitions AS t ON t.stmt_at >= b.at + $1 * interval '1 millisecond' AND t.stmt_at < b.blocked_until
     WHERE b.queue = 'lim' AND b.blocked_until IS NOT NULL AND t.op = 'update' AND t.old_status = 'queued' AND t.new_status = 'processing'
       AND t.job_id IN (SELECT id FROM background_jobs_all WHERE queue_name = 'lim')
     ORDER BY t.stmt_at LIMIT 20`,
    [IN_FLIGHT_MS],
  );
  return rows.map((r) => ({
    invariant: 'limits.rate-limited-block',
    jobIds: [r.job_id],
    detail: `job ${r.job_id} claimed by ${r.by} at ${r.at.toISOString()}, inside the block of a 429 stored at ${r.from_at.toISOString()} until ${r.until.toISOString()}`,
  }));
}
