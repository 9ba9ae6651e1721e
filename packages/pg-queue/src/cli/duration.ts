import { InvalidArgumentError } from 'commander';
import { BAD_DURATION, BAD_INSTANT, BAD_NUMBER, NO_SUCH_INSTANT } from './cli.messages.js';
import { UsageError } from './errors.js';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** "90s", "30m", "1.5h", "7d" (or a bare number of ms) to milliseconds; a commander argument parser. */
export function parseDuration(option: string): (value: string) => number {
  return (value) => {
    const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?$/.exec(value.trim());
    if (!match) throw new InvalidArgumentError(BAD_DURATION(option, value));
    return Math.round(Number(match[1]) * UNIT_MS[match[2] ?? 'ms']);
  };
}

/** A whole number from `min` to `max`; a commander argument parser. */
export function parseInteger(option: string, min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(BAD_NUMBER(option, value, `a whole number from ${min} to ${max}`));
    }
    return n;
  };
}

const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?$/;
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

/**
 * An ISO 8601 date-time (`2026-12-01T08:00:00Z`, `2026-12-01 08:00+01:00`, `2026-12-01`) as a Date, refusing one that
 * does not exist: JavaScript's Date reads 2026-02-30 as March 2 and 2026-04-31 as May 1, which would store another
 * instant than the one meant. Bad usage (exit 2) otherwise.
 */
export function parseInstant(option: string, value: string): Date {
  const text = value.trim();
  const match = ISO_INSTANT.exec(text);
  if (!match) throw new UsageError(BAD_INSTANT(option, value));
  const [year, month, day, hour = 0, minute = 0, second = 0] = match.slice(1, 7).map((n) => (n === undefined ? undefined : Number(n))) as number[];
  if (month < 1 || month > 12) throw new UsageError(NO_SUCH_INSTANT(option, value, `there is no month ${month}`));
  const days = new Date(Date.UTC(2000, month, 0)).getUTCDate() - (month === 2 && !isLeapYear(year) ? 1 : 0);
  if (day < 1 || day > days) throw new UsageError(NO_SUCH_INSTANT(option, value, `${MONTHS[month - 1]} ${year} has ${days} days`));
  if (hour > 23 || minute > 59 || second > 59) throw new UsageError(NO_SUCH_INSTANT(option, value, 'hours go from 00 to 23, minutes and seconds from 00 to 59'));
  const date = new Date(text);
  if (Number.isNaN(date.getTime())) throw new UsageError(BAD_INSTANT(option, value));
  return date;
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

/** Milliseconds in the largest unit that divides them evenly: 7200000 -> "2h". */
export function formatDuration(ms: number): string {
  for (const unit of ['w', 'd', 'h', 'm', 's']) if (ms > 0 && ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  return `${ms}ms`;
}
