// The simulation's invariants for the recurring schedule `tick` (issue 40), declared by every process (sim-worker.ts)
// with a catch-up window of 60 s. Read from sim_fires, which the job table's trigger fills at each fired insert (so a
// pruned job still counts).
import type pg from 'pg';
import type { Violation } from './invariants.js';

/**
 * Each fire time of a schedule is enqueued at most once across all instances (each instance competes for every
 * fire time; one compare-and-set wins it), and fires keep coming while an instance is alive: the enqueuing process
 * never stops, so from the first fire to `until` (the end of the drain) every second has its job, and the last one
 * is within a few seconds of `until` (a fire missed while every scheduler was slow or stalled is caught up inside
 * the window, so a stall excuses nothing here).
 */
export async function recurringFires(db: pg.Pool, until: string): Promise<Violation[]> {
  const out: Violation[] = [];
  const { rows: twice } = await db.query<{ name: string; fire_at: string; ids: string[] }>(
    `SELECT name, fire_at::text, array_agg(job_id::text ORDER BY job_id) AS ids FROM sim_fires GROUP BY name, fire_at HAVING count(*) > 1 ORDER BY fire_at`,
  );
  for (const r of twice) out.push({ invariant: 'recurring.fired-twice', jobIds: r.ids, detail: `schedule ${r.name}'s fire time ${r.fire_at} enqueued ${r.ids.length} times` });
  const { rows: gaps } = await db.query<{ name: string; after: string; next: string }>(
    `SELECT name, fire_at::text AS after, next::text FROM (
       SELECT name, fire_at, lead(fire_at) OVER (PARTITION BY name ORDER BY fire_at) AS next FROM (SELECT DISTINCT name, fire_at FROM sim_fires) AS d) AS f
     WHERE next - fire_at > interval '1 second' ORDER BY fire_at LIMIT 20`,
  );
  for (const g of gaps) out.push({ invariant: 'recurring.fire-missing', jobIds: [], detail: `schedule ${g.name} fired at ${g.after} and next at ${g.next}: the fire times between have no job` });
  const { rows: last } = await db.query<{ last: string | null; behind_ms: number | null }>(
    `SELECT max(fire_at)::text AS last, (extract(epoch FROM $1::timestamptz - max(fire_at)) * 1000)::int AS behind_ms FROM sim_fires WHERE name = 'tick'`,
    [until],
  );
  if (last[0].last === null || (last[0].behind_ms ?? 0) > 5_000) {
    out.push({ invariant: 'recurring.stopped-firing', jobIds: [], detail: `schedule tick's last fire ${last[0].last ?? '(none)'} is ${last[0].behind_ms ?? '?'} ms before the drain ended (${until})` });
  }
  return out;
}
