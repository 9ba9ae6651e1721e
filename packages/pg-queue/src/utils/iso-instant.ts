// An ISO 8601 date-time read strictly: JavaScript's Date reads 2026-02-30 as March 2 and 2026-04-31 as May 1, which
// would store another instant than the one meant. The CLI's --run-at / --start / --end and a schedule's startDate /
// endDate given as text go through it.

const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?$/;
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

/**
 * `2026-12-01T08:00:00Z`, `2026-12-01 08:00+01:00`, `2026-12-01` as a Date; `shape` when the text is not such a
 * date-time, `noSuch` (with the reason) when it names no real day or time.
 */
export function readIsoInstant(value: string): { date: Date } | { shape: true } | { noSuch: string } {
  const text = value.trim();
  const match = ISO_INSTANT.exec(text);
  if (!match) return { shape: true };
  const [year, month, day, hour = 0, minute = 0, second = 0] = match.slice(1, 7).map((n) => (n === undefined ? undefined : Number(n))) as number[];
  if (month < 1 || month > 12) return { noSuch: `there is no month ${month}` };
  const days = new Date(Date.UTC(2000, month, 0)).getUTCDate() - (month === 2 && !isLeapYear(year) ? 1 : 0);
  if (day < 1 || day > days) return { noSuch: `${MONTHS[month - 1]} ${year} has ${days} days` };
  if (hour > 23 || minute > 59 || second > 59) return { noSuch: 'hours go from 00 to 23, minutes and seconds from 00 to 59' };
  const date = new Date(text);
  if (Number.isNaN(date.getTime())) return { shape: true };
  return { date };
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}
