// The simulation's invariants for the recurring schedule `tick` (issue 40), declared by every process (sim-worker.ts)
// with a catch-up window of 60 s, and for the runtime schedule `every` (issue 43: an interval with a limit, a start and
// an end, run-sim.ts). Read from sim_fires, which the job table's trigger fills at each fired insert (so a pruned job
// still counts), and from the schedule's row.
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
    // Not the operator's fire-now jobs (sim_ops 'schedule-fire-now'): one takes the database clock's millisecond as
    // its fire time, which a tick's claim of an interval schedule may take too (seed 1057848435: both at .253).
    `SELECT name, fire_at::text, array_agg(job_id::text ORDER BY job_id) AS ids FROM sim_fires
     WHERE job_id NOT IN (SELECT unnest(job_ids) FROM sim_ops WHERE op = 'schedule-fire-now')
     GROUP BY name, fire_at HAVING count(*) > 1 ORDER BY fire_at`,
  );
  for (const r of twice) out.push({ invariant: 'recurring.fired-twice', jobIds: r.ids, detail: `schedule ${r.name}'s fire time ${r.fire_at} enqueued ${r.ids.length} times` });
  const { rows: gaps } = await db.query<{ name: string; after: string; next: string }>(
    `SELECT name, fire_at::text AS after, next::text FROM (
       SELECT name, fire_at, lead(fire_at) OVER (PARTITION BY name ORDER BY fire_at) AS next FROM (SELECT DISTINCT name, fire_at FROM sim_fires) AS d) AS f
     WHERE name = 'tick' AND next - fire_at > interval '1 second' ORDER BY fire_at LIMIT 20`,
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

/** The `every` schedule as run-sim made it. */
export interface EverySchedule {
  everyMs: number;
  limit: number;
  startDate: Date;
  endDate: Date;
}

/**
 * The `every` schedule: its fires (each a claim's database clock, whichever process claimed it) are never closer than
 * its interval, so never two in one interval; never more than its limit; none before its start or after its end; the
 * row's count of fires is the number of jobs it fired (no claim without its job, no job without its claim); and once its
 * limit was reached, or its end passed (an interval and 5 s before `until`, the drain's end: the claim after the end
 * ends it), it has ended (no next fire). And it fired at all
 * when its window was long enough: the enqueuing process, never faulted, ticks throughout.
 */
export async function everyFires(db: pg.Pool, every: EverySchedule, until: string): Promise<Violation[]> {
  const out: Violation[] = [];
  const { rows: fires } = await db.query<{ job_id: string; fire_at: Date; fire_text: string }>(
    `SELECT job_id::text, fire_at, fire_at::text AS fire_text FROM sim_fires WHERE name = 'every' ORDER BY fire_at, job_id`,
  );
  for (let i = 1; i < fires.length; i++) {
    const gap = fires[i].fire_at.getTime() - fires[i - 1].fire_at.getTime();
    if (gap < every.everyMs) {
      out.push({ invariant: 'every.too-soon', jobIds: [fires[i - 1].job_id, fires[i].job_id], detail: `schedule every fired at ${fires[i - 1].fire_text} and ${fires[i].fire_text}, ${gap} ms apart (interval ${every.everyMs} ms)` });
    }
  }
  if (fires.length > every.limit) out.push({ invariant: 'every.over-limit', jobIds: fires.slice(every.limit).map((f) => f.job_id), detail: `schedule every fired ${fires.length} times; its limit is ${every.limit}` });
  const outside = fires.filter((f) => f.fire_at < every.startDate || f.fire_at > every.endDate);
  if (outside.length > 0) {
    out.push({ invariant: 'every.outside-dates', jobIds: outside.map((f) => f.job_id), detail: `schedule every fired at ${outside.map((f) => f.fire_text).join(', ')}, outside ${every.startDate.toISOString()} .. ${every.endDate.toISOString()}` });
  }
  const { rows } = await db.query<{ fires: number; next_fire_at: Date | null; ended_by_end: boolean; long_window: boolean }>(
    `SELECT fires::int, next_fire_at, end_at < $1::timestamptz - ($2::int + 5000) * interval '1 millisecond' AS ended_by_end,
       least(end_at, $1::timestamptz) - start_at > ($2::int * 3 + 10000) * interval '1 millisecond' AS long_window
     FROM background_schedules WHERE name = 'every'`,
    [until, every.everyMs],
  );
  const row = rows[0];
  if (!row) return [...out, { invariant: 'every.row-missing', jobIds: [], detail: 'the schedule every is gone' }];
  if (row.fires !== fires.length) out.push({ invariant: 'every.count-differs', jobIds: [], detail: `schedule every's row counts ${row.fires} fires; it fired ${fires.length} jobs` });
  if ((row.ended_by_end || fires.length >= every.limit) && row.next_fire_at !== null) {
    out.push({ invariant: 'every.not-ended', jobIds: [], detail: `schedule every ${row.ended_by_end ? 'passed its end' : 'reached its limit'} but still has a next fire, ${row.next_fire_at.toISOString()}` });
  }
  if (row.long_window && fires.length === 0) out.push({ invariant: 'every.never-fired', jobIds: [], detail: `schedule every never fired between ${every.startDate.toISOString()} and ${until}` });
  return out;
}
