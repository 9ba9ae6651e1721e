import { CronExpressionParser, type CronExpression } from 'cron-parser';

/** What a schedule does with fire times that passed while no instance was ticking (downtime, a pause of the event loop). */
export type MissedFiresPolicy = { policy: 'skip' } | { policy: 'latest' } | { policy: 'window'; windowMs: number };

/** A fire is on time while it is the latest due fire and at most this late; any other due fire was missed. */
export const ON_TIME_MS = 60_000;
/** Fires enqueued by one claim at most (a window policy after a long downtime): the latest ones are kept. */
export const MAX_FIRES_PER_CLAIM = 1_000;

export interface FirePlan {
  /** Fire times to enqueue now, ascending (epoch ms). */
  fires: number[];
  /** The schedule's next fire time after now (epoch ms). */
  nextFireAtMs: number;
  /** Due fire times left out by the policy (the latest due fire, when some were: for the log). */
  skippedThroughMs: number | null;
}

/**
 * Parses a cron expression (5 fields, or 6 with seconds first) in an IANA time zone. The time zone and DST
 * rules are cron-parser's (on Luxon): a local time that does not exist (spring forward) fires at the first
 * instant after the gap; one that happens twice (fall back) fires once, at its first occurrence; `* /30`-style
 * steps keep every instant. Throws with cron-parser's reason for a bad expression.
 */
export function parseCron(cron: string, timeZone: string, fromMs: number): CronExpression {
  return CronExpressionParser.parse(cron, { currentDate: new Date(fromMs), tz: timeZone });
}

/** The first fire time strictly after `afterMs`. */
export function nextFireAfter(cron: string, timeZone: string, afterMs: number): number {
  return parseCron(cron, timeZone, afterMs).next().getTime();
}

/**
 * Plans one claim of a due schedule: `nextFireAtMs` (<= now) is the fire the row says is next, `nowMs` the
 * database clock. Pure: the caller claims the plan with a compare-and-set on the row.
 */
export function planFires(cron: string, timeZone: string, missed: MissedFiresPolicy, nextFireAtMs: number, nowMs: number): FirePlan {
  const nextFireAt = nextFireAfter(cron, timeZone, nowMs);
  // The latest planned fire <= now (two candidates: the latest one prev() finds may be a repeated local time
  // that planning skips); never before the row's fire.
  const latest = Math.max(nextFireAtMs, plannedFires(cron, timeZone, nextFireAtMs, nowMs, 2).at(-1) ?? nextFireAtMs);
  const onTime = nowMs - latest <= ON_TIME_MS;
  let fires: number[];
  if (missed.policy === 'latest') fires = [latest];
  else if (missed.policy === 'skip') fires = onTime ? [latest] : [];
  else {
    // Every planned fire within the window; the on-time fire even if the window is shorter.
    const from = Math.max(nextFireAtMs, nowMs - missed.windowMs);
    fires = plannedFires(cron, timeZone, from, nowMs, MAX_FIRES_PER_CLAIM);
    if ((onTime || latest >= from) && fires.at(-1) !== latest) fires = [...fires, latest].slice(-MAX_FIRES_PER_CLAIM);
  }
  const first = fires[0];
  const skipped = first === undefined ? latest : first > nextFireAtMs ? parseCron(cron, timeZone, first).prev().getTime() : null;
  return { fires, nextFireAtMs: nextFireAt, skippedThroughMs: skipped !== null && skipped >= nextFireAtMs ? skipped : null };
}

/**
 * The fire times in [fromMs, toMs] as the scheduler plans them (each the next() of the one before), the latest
 * `limit` of them, ascending. Walking back with prev() is cheap but not the same: on a DST fall-back day it
 * returns a repeated local time twice ('30 2 * * *' at 00:30Z and 01:30Z in Europe/Berlin) where next() fires it
 * once. So prev() only finds where to start, and the walk forward from the fire planning reaches there decides.
 */
function plannedFires(cron: string, timeZone: string, fromMs: number, toMs: number, limit: number): number[] {
  const back = parseCron(cron, timeZone, toMs + 1); // prev() is strictly before its start: toMs itself counts
  let earliest: number | undefined;
  for (let i = 0; i < limit; i++) {
    const fire = back.prev().getTime();
    if (fire < fromMs) break;
    earliest = fire;
  }
  if (earliest === undefined) return [];
  // The fire planning reaches from the one before: `earliest` itself, unless it repeats a local time.
  const start = nextFireAfter(cron, timeZone, parseCron(cron, timeZone, earliest).prev().getTime());
  const fires: number[] = [];
  const walk = parseCron(cron, timeZone, start);
  for (let fire = start; fire <= toMs; fire = walk.next().getTime()) if (fire >= fromMs) fires.push(fire);
  return fires.slice(-limit);
}

/** Throws unless the IANA time zone is known to this Node (Intl), the same database Luxon reads. */
export function assertTimeZone(timeZone: string): void {
  new Intl.DateTimeFormat('en-US', { timeZone }).format(0);
}

/** When a schedule fires: a cron expression (in its time zone), or a fixed interval from the last fire. */
export type FireRule = { cron: string; timeZone: string; everyMs?: null } | { everyMs: number; cron?: null };

/** When a schedule's definition fires, as the functions here take it. */
export function ruleOf(d: { cron: string | null; everyMs: number | null; timeZone: string }): FireRule {
  return d.everyMs !== null ? { everyMs: d.everyMs } : { cron: d.cron!, timeZone: d.timeZone };
}

/** What bounds a schedule's fires (null: no bound). */
export interface FireBounds {
  startMs: number | null;
  endMs: number | null;
  limit: number | null;
}

/** Why a schedule fires no more. */
export type Ended = 'limit' | 'endDate';

/**
 * The first fire of a schedule stored, changed or resumed at `nowMs` (the database clock): a cron schedule's first
 * fire time after now and at or after startDate; an `every` schedule's startDate while it is ahead, else one interval
 * from now. Null when that is after endDate. The limit is not looked at here: the row's count of fires is the
 * database's (the upsert statement ends a schedule that reached it).
 */
export function firstFire(rule: FireRule, bounds: Pick<FireBounds, 'startMs' | 'endMs'>, nowMs: number): number | null {
  const { startMs, endMs } = bounds;
  const first =
    rule.everyMs != null
      ? startMs !== null && startMs > nowMs
        ? startMs
        : nowMs + rule.everyMs
      : nextFireAfter(rule.cron!, (rule as { timeZone: string }).timeZone, Math.max(nowMs, startMs === null ? -Infinity : startMs - 1));
  return endMs !== null && first > endMs ? null : first;
}

/**
 * A cron plan (planFires) within a schedule's bounds: the fires before startDate or after endDate left out, the
 * earliest ones kept up to the limit (`fires` already counted), and the next fire, or null with the reason when the
 * schedule ends with this claim. Pure.
 */
export function boundPlan(plan: FirePlan, cron: string, timeZone: string, bounds: FireBounds, fires: number): { fires: number[]; nextFireAtMs: number | null; ended: Ended | null } {
  const { startMs, endMs, limit } = bounds;
  let kept = plan.fires.filter((f) => (startMs === null || f >= startMs) && (endMs === null || f <= endMs));
  if (limit !== null) kept = kept.slice(0, Math.max(0, limit - fires));
  if (limit !== null && fires + kept.length >= limit) return { fires: kept, nextFireAtMs: null, ended: 'limit' };
  let next = plan.nextFireAtMs;
  if (startMs !== null && next < startMs) next = nextFireAfter(cron, timeZone, startMs - 1);
  if (endMs !== null && next > endMs) return { fires: kept, nextFireAtMs: null, ended: 'endDate' };
  return { fires: kept, nextFireAtMs: next, ended: null };
}
