// A schedule's payload is a template: placeholders in its string values are replaced at each fire. Plain JSON
// strings, so a template made in code, by upsertSchedule, by the CLI (`--payload`) or by SQL (the jsonb column
// background_schedules.payload) is the same thing; the scheduler fills it in, in Node, when it builds the fire's job.

/** The placeholders a payload template may hold, and what each is replaced with. */
export const PLACEHOLDERS = {
  fireAt: 'the fire time, ISO 8601 UTC (as _schedule.fireAt)',
  fireDate: "the fire time's day in the schedule's time zone, YYYY-MM-DD",
  name: "the schedule's name",
} as const;

export type Placeholder = keyof typeof PLACEHOLDERS;

/** `{{word}}`: a placeholder, known or not (an unknown one is refused when the schedule is stored, kept as text if SQL stored it). */
const TOKEN = /\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}/g;

/** The first unknown placeholder of a template, with where it is (`payload.file`); null when every one is known. */
export function unknownPlaceholder(payload: Record<string, unknown>): string | null {
  let found: string | null = null;
  walkStrings(payload, 'payload', (text, path) => {
    for (const [, word] of text.matchAll(TOKEN)) {
      if (!(word in PLACEHOLDERS)) {
        found = `${path} holds the placeholder {{${word}}}, which is none of ${Object.keys(PLACEHOLDERS).map((p) => `{{${p}}}`).join(', ')}`;
        return false;
      }
    }
    return true;
  });
  return found;
}

/** The payload of one fire: the template with its placeholders replaced (the template is not changed). */
export function renderPayload(template: Record<string, unknown>, values: Record<Placeholder, string>): Record<string, unknown> {
  return fill(template, values) as Record<string, unknown>;
}

/** The values of a fire's placeholders. */
export function placeholderValues(name: string, fireMs: number, timeZone: string): Record<Placeholder, string> {
  return { fireAt: new Date(fireMs).toISOString(), fireDate: dayIn(fireMs, timeZone), name };
}

/** Whether a template (its stored JSON) may hold a placeholder at all: most payloads skip the walk. */
export function mayHoldPlaceholders(json: string): boolean {
  return json.includes('{{');
}

function fill(value: unknown, values: Record<Placeholder, string>): unknown {
  if (typeof value === 'string') return value.includes('{{') ? value.replace(TOKEN, (token, word: string) => (word in values ? values[word as Placeholder] : token)) : value;
  if (Array.isArray(value)) return value.map((v) => fill(v, values));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = fill(v, values);
    return out;
  }
  return value;
}

/** Calls `visit` with every string value and its path; stops when it returns false. */
function walkStrings(value: unknown, path: string, visit: (text: string, path: string) => boolean): boolean {
  if (typeof value === 'string') return visit(value, path);
  if (Array.isArray(value)) return value.every((v, i) => walkStrings(v, `${path}[${i}]`, visit));
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).every(([k, v]) => walkStrings(v, /^[A-Za-z_$][\w$]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`, visit));
  }
  return true;
}

const dayFormats = new Map<string, Intl.DateTimeFormat>();

/** YYYY-MM-DD of an instant in an IANA time zone. */
function dayIn(ms: number, timeZone: string): string {
  let format = dayFormats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' });
    if (dayFormats.size < 1_000) dayFormats.set(timeZone, format);
  }
  const parts = format.formatToParts(ms);
  const get = (type: string) => parts.find((p) => p.type === type)!.value;
  return `${get('year').padStart(4, '0')}-${get('month')}-${get('day')}`;
}
