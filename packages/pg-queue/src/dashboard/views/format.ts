/**
 * Display helpers shared by the views. Times are the database's, written in UTC; the script rewrites them into the
 * viewer's zone (`<time data-local>`) and puts the local and ISO times in a relative time's title.
 */
import { html, type HtmlValue } from './html.js';

export function formatTime(value: Date | string | null | undefined): string {
  if (value === null || value === undefined) return '—';
  const date = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return date.toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, ' UTC');
}

export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}

export function formatCount(n: number): string {
  return n.toLocaleString('en');
}

/** JSON pretty-printed for a <pre>, or the text itself. */
export function formatJson(value: unknown): string {
  if (typeof value === 'string') return value;
  return JSON.stringify(value, null, 2) ?? 'null';
}

/** A duration in ms as people read it in a list: 850 ms, 12.4 s, 3 min 5 s, 2 h 5 min, 3 d 4 h. */
export function formatSpan(ms: number): string {
  if (ms < 1_000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  const s = Math.round(ms / 1_000);
  // "1 min", not "1 min 0 s".
  const two = (big: number, bigUnit: string, small: number, smallUnit: string) => (small === 0 ? `${big} ${bigUnit}` : `${big} ${bigUnit} ${small} ${smallUnit}`);
  if (s < 3600) return two(Math.floor(s / 60), 'min', s % 60, 's');
  if (s < 86_400) return two(Math.floor(s / 3600), 'h', Math.floor((s % 3600) / 60), 'min');
  return two(Math.floor(s / 86_400), 'd', Math.floor((s % 86_400) / 3600), 'h');
}

/** `at` from `now` (both the database's clock) in the largest unit that fits: "in 4 min", "12 s ago", "3 d ago". */
export function formatRelative(at: Date | string, now: Date | string): string {
  const diff = new Date(at).getTime() - new Date(now).getTime();
  const abs = Math.abs(diff);
  if (abs < 1_000) return 'now';
  const units: [number, string][] = [[86_400_000, 'd'], [3_600_000, 'h'], [60_000, 'min'], [1_000, 's']];
  const [size, unit] = units.find(([n]) => abs >= n)!;
  const n = Math.floor(abs / size);
  return diff > 0 ? `in ${n} ${unit}` : `${n} ${unit} ago`;
}

/** A time as a list shows it: relative to the read's `now`, the absolute UTC time on hover and in `datetime`. */
export function timeCell(at: Date | string | null | undefined, now: Date | string): HtmlValue {
  if (at === null || at === undefined) return '—';
  const date = new Date(at);
  if (Number.isNaN(date.getTime())) return String(at);
  return html`<time datetime="${date.toISOString()}" title="${formatTime(date)}">${formatRelative(date, now)}</time>`;
}

/** An absolute time: UTC as written (formatTime), the viewer's zone once the script has run, the ISO time on hover. */
export function absTime(at: Date | string | null | undefined): HtmlValue {
  if (at === null || at === undefined) return '—';
  const date = new Date(at);
  if (Number.isNaN(date.getTime())) return String(at);
  return html`<time datetime="${date.toISOString()}" title="${date.toISOString()}" data-local>${formatTime(date)}</time>`;
}
