/**
 * A cron expression in words, for the common shapes (every N minutes, hourly at :MM, daily, on weekdays, weekly,
 * monthly at a time); null for anything else, which the page shows as the expression alone. Hand-written: the
 * dashboard needs a sentence for the schedules people write, not a cron grammar (cron-parser, already a dependency,
 * computes the fire times).
 */
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const NUMBER = /^\d{1,2}$/;

function at(hour: string, minute: string): string {
  return `${hour.padStart(2, '0')}:${minute.padStart(2, '0')}`;
}

function ordinal(n: number): string {
  const tail = n % 100 >= 11 && n % 100 <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${tail}`;
}

/** "1-5" / "MON-FRI" and "0,6": the day-of-week field in words; null when not a simple one. */
function days(field: string): string | null {
  const names: Record<string, number> = { SUN: 0, MON: 1, TUE: 2, WED: 3, THU: 4, FRI: 5, SAT: 6 };
  const day = (t: string) => (/^\d$/.test(t) ? Number(t) % 7 : names[t.toUpperCase()]);
  if (/^(1-5|MON-FRI)$/i.test(field)) return 'on weekdays';
  if (/^(0,6|6,0|SAT,SUN|SUN,SAT)$/i.test(field)) return 'on weekends';
  const list = field.split(',').map(day);
  if (list.some((d) => d === undefined)) return null;
  return `on ${list.map((d) => DAYS[d!]).join(', ')}`;
}

export function cronInWords(cron: string): string | null {
  const fields = cron.trim().split(/\s+/);
  // A leading seconds field of 0 reads as the five-field form.
  if (fields.length === 6 && fields[0] === '0') fields.shift();
  if (fields.length !== 5) return null;
  const [minute, hour, dom, month, dow] = fields;
  if (month !== '*') return null;
  if (minute === '*' && hour === '*' && dom === '*' && dow === '*') return 'every minute';
  const step = /^\*\/(\d{1,2})$/.exec(minute);
  if (step && hour === '*' && dom === '*' && dow === '*') return `every ${step[1]} minutes`;
  if (!NUMBER.test(minute)) return null;
  const hourStep = /^\*\/(\d{1,2})$/.exec(hour);
  if (hourStep && dom === '*' && dow === '*') return `every ${hourStep[1]} hours, at minute ${Number(minute)}`;
  if (hour === '*' && dom === '*' && dow === '*') return `every hour at :${minute.padStart(2, '0')}`;
  if (!NUMBER.test(hour)) return null;
  const time = at(hour, minute);
  if (dom === '*' && dow === '*') return `every day at ${time}`;
  if (dom === '*') {
    const which = days(dow);
    return which ? `${which} at ${time}` : null;
  }
  if (dow === '*' && NUMBER.test(dom)) return `on the ${ordinal(Number(dom))} of every month at ${time}`;
  return null;
}

const UNITS: [number, string][] = [
  [604_800_000, 'week'],
  [86_400_000, 'day'],
  [3_600_000, 'hour'],
  [60_000, 'minute'],
  [1_000, 'second'],
];

/**
 * An `every` schedule's interval in words: "every 30 seconds", "every minute", "every 1 hour 30 minutes", "every 1500
 * ms" when it is no whole number of seconds.
 */
export function everyInWords(ms: number): string {
  if (ms % 1_000 !== 0) return `every ${ms} ms`;
  const parts: string[] = [];
  let left = ms;
  for (const [size, unit] of UNITS) {
    const n = Math.floor(left / size);
    if (n === 0) continue;
    left -= n * size;
    parts.push(`${n} ${unit}${n === 1 ? '' : 's'}`);
  }
  if (parts.length === 1 && parts[0].startsWith('1 ')) return `every ${parts[0].slice(2)}`;
  return `every ${parts.join(' ')}`;
}
