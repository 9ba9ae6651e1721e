// The simulation's invariants for schedule edits (issues 40 and 44): the runtime schedule `edited` (every 1 s into queue
// `tick`, run-sim.ts) whose interval the operator changes, which it pauses and resumes, and fires now (operator.ts,
// `schedule-edit`, each in sim_ops). Read from sim_fires (the job table's trigger, so a pruned job still counts).
import type pg from 'pg';
import type { Violation } from './invariants.js';

/** How late a fire may come after its time, less nothing: the enqueuing process never stops ticking (every 1 s). */
const STOPPED_SLACK_MS = 10_000;

/**
 * - Two scheduled fires are never closer than the smallest interval in force between them (an edit takes effect from
 *   its next fire after now: README, "Recurring jobs"), so never two in one interval, whoever claims them.
 * - No scheduled fire has its time inside a pause (from the pause's answer to the resume's call): "fires during the
 *   pause never run".
 * - A fire now is one job of the schedule, at once, and moves nothing: it is not counted among the scheduled fires.
 * - The schedule keeps firing to the end: its last scheduled fire is at most its interval and 10 s before `until`
 *   (the end of the drain), unless a pause was on then.
 */
export async function editedScheduleFires(db: pg.Pool, firstEveryMs: number, until: string): Promise<Violation[]> {
  const { rows: ops } = await db.query<{ op: string; t0: Date; t1: Date; every_ms: number | null; ids: string[] }>(
    `SELECT op, t0, t1, (detail ->> 'everyMs')::int AS every_ms, job_ids::text[] AS ids FROM sim_ops WHERE op LIKE 'schedule-%' ORDER BY t0`,
  );
  const firedNow = new Set(ops.filter((o) => o.op === 'schedule-fire-now').flatMap((o) => o.ids));
  const { rows: all } = await db.query<{ job_id: string; fire_at: Date; fire_text: string }>(
    `SELECT job_id::text, fire_at, fire_at::text AS fire_text FROM sim_fires WHERE name = 'edited' ORDER BY fire_at, job_id`,
  );
  const fires = all.filter((f) => !firedNow.has(f.job_id));
  const out: Violation[] = [];
  // The interval in force at a fire: the last edit answered before it (or the first interval); an edit in flight
  // between two fires (called before the later one, answered after the earlier one) may count for either.
  const edits = ops.filter((o) => o.op === 'schedule-interval').map((o) => ({ from: o.t0.getTime(), to: o.t1.getTime(), everyMs: o.every_ms! }));
  const smallestBetween = (a: number, b: number) => {
    let least = edits.filter((e) => e.to <= a).pop()?.everyMs ?? firstEveryMs;
    for (const e of edits) if (e.from <= b && e.to >= a) least = Math.min(least, e.everyMs);
    return least;
  };
  for (let i = 1; i < fires.length; i++) {
    const a = fires[i - 1].fire_at.getTime();
    const b = fires[i].fire_at.getTime();
    const least = smallestBetween(a, b);
    if (b - a < least) {
      out.push({ invariant: 'edited.too-soon', jobIds: [fires[i - 1].job_id, fires[i].job_id], detail: `schedule edited fired at ${fires[i - 1].fire_text} and ${fires[i].fire_text}, ${b - a} ms apart; the smallest interval in force between them was ${least} ms` });
    }
  }
  // The schedule's pauses: from the first pause's answer to the next resume's call. Two operator steps may overlap (a
  // pause held up to 4 s, steps 3 to 8 s apart): the second pause finds it paused, the first resume ends the pause
  // for both, and the second resume finds it running (seed 64: a pause paired with no resume counted 108 fires).
  const pauses: { from: number; to: number }[] = [];
  for (const o of ops) {
    const open = pauses.length > 0 && pauses[pauses.length - 1].to === Infinity;
    if (o.op === 'schedule-pause' && !open) pauses.push({ from: o.t1.getTime(), to: Infinity });
    if (o.op === 'schedule-resume' && open) pauses[pauses.length - 1].to = o.t0.getTime();
  }
  for (const f of fires) {
    const t = f.fire_at.getTime();
    const inside = pauses.find((p) => t > p.from && t < p.to);
    if (inside) out.push({ invariant: 'edited.fired-while-paused', jobIds: [f.job_id], detail: `schedule edited fired at ${f.fire_text}, inside its pause from ${new Date(inside.from).toISOString()} to ${Number.isFinite(inside.to) ? new Date(inside.to).toISOString() : 'the end'}` });
  }
  for (const o of ops.filter((x) => x.op === 'schedule-fire-now')) {
    const id = o.ids[0];
    if (!id || !all.some((f) => f.job_id === id)) out.push({ invariant: 'edited.fire-now-missing', jobIds: o.ids, detail: `fireSchedule('edited') at ${o.t0.toISOString()} answered ${id ?? 'null'}, but no job of the schedule has that id` });
  }
  const untilMs = (await db.query<{ at: Date }>('SELECT $1::timestamptz AS at', [until])).rows[0].at.getTime();
  const lastPause = pauses[pauses.length - 1];
  const pausedAtEnd = lastPause !== undefined && lastPause.to > untilMs - STOPPED_SLACK_MS;
  const lastEvery = edits[edits.length - 1]?.everyMs ?? firstEveryMs;
  const last = fires[fires.length - 1]?.fire_at.getTime();
  if (!pausedAtEnd && (last === undefined || untilMs - last > lastEvery + STOPPED_SLACK_MS)) {
    out.push({ invariant: 'edited.stopped-firing', jobIds: [], detail: `schedule edited's last scheduled fire ${last === undefined ? '(none)' : new Date(last).toISOString()} is ${last === undefined ? '?' : untilMs - last} ms before the drain ended (${until}); its interval then: ${lastEvery} ms` });
  }
  return out;
}
