import { InvalidArgumentError } from 'commander';
import { BAD_DURATION, BAD_INSTANT, BAD_NUMBER, NO_SUCH_INSTANT } from './cli.messages.js';
import { UsageError } from './errors.js';
import { readIsoInstant } from '../utils/iso-instant.js';

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

/**
 * An ISO 8601 date-time (`2026-12-01T08:00:00Z`, `2026-12-01 08:00+01:00`, `2026-12-01`) as a Date, refusing one that
 * does not exist (utils/iso-instant.ts). Bad usage (exit 2) otherwise.
 */
export function parseInstant(option: string, value: string): Date {
  const read = readIsoInstant(value);
  if ('date' in read) return read.date;
  if ('noSuch' in read) throw new UsageError(NO_SUCH_INSTANT(option, value, read.noSuch));
  throw new UsageError(BAD_INSTANT(option, value));
}

/** Milliseconds in the largest unit that divides them evenly: 7200000 -> "2h". */
export function formatDuration(ms: number): string {
  for (const unit of ['w', 'd', 'h', 'm', 's']) if (ms > 0 && ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  return `${ms}ms`;
}
