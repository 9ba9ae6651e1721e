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
  // The latest fire <= now. prev() is strictly before its start, so start 1 ms after now; never before the row's fire.
  const latest = Math.max(nextFireAtMs, parseCron(cron, timeZone, nowMs + 1).prev().getTime());
  const onTime = nowMs - latest <= ON_TIME_MS;
  let fires: number[];
  if (missed.policy === 'latest') fires = [latest];
  else if (missed.policy === 'skip') fires = onTime ? [latest] : [];
  else {
    // Every due fire within the window, walking back from the latest; the on-time fire even if the window is shorter.
    const from = Math.max(nextFireAtMs, nowMs - missed.windowMs);
    fires = onTime || latest >= from ? [latest] : [];
    const walk = parseCron(cron, timeZone, latest);
    while (fires.length < MAX_FIRES_PER_CLAIM) {
      const fire = walk.prev().getTime();
      if (fire < from) break;
      fires.push(fire);
    }
    fires.reverse();
  }
  const first = fires[0];
  const skipped = first === undefined ? latest : first > nextFireAtMs ? parseCron(cron, timeZone, first).prev().getTime() : null;
  return { fires, nextFireAtMs: nextFireAt, skippedThroughMs: skipped !== null && skipped >= nextFireAtMs ? skipped : null };
}

/** Throws unless the IANA time zone is known to this Node (Intl), the same database Luxon reads. */
export function assertTimeZone(timeZone: string): void {
  new Intl.DateTimeFormat('en-US', { timeZone }).format(0);
}
