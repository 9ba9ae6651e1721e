import { terminalLine, terminalText } from '../utils/terminal-text.js';

// Everything the command writes goes through terminalText (utils/terminal-text.ts): what the database holds (queue,
// flow and step names, payloads, errors, unique keys) is user-controlled, and its control sequences are shown as
// escapes (\u001b) instead of acting on the terminal. JSON stays valid (\u001b is a JSON escape).

/** Writes to stdout; the command's result (tables, JSON). Notes and progress go to stderr. */
export function print(line = ''): void {
  process.stdout.write(`${terminalText(line)}\n`);
}

export function note(line: string): void {
  process.stderr.write(`${terminalText(line)}\n`);
}

/** A value shown on one line (a field, a table cell): line feeds and tabs escaped too. */
export function oneLine(text: string): string {
  return terminalLine(text);
}

export function printJson(value: unknown): void {
  print(JSON.stringify(value, null, 2));
}

/** Columns padded to their widest cell; numbers (right-aligned) where every cell but the header is numeric. */
export function printTable(header: string[], cells: string[][]): void {
  const rows = cells.map((row) => row.map(terminalLine));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const numeric = header.map((_, i) => rows.length > 0 && rows.every((r) => /^~?[\d,]+$/.test(r[i])));
  const line = (cells: string[]) =>
    cells.map((c, i) => (numeric[i] ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd();
  print(line(header));
  print(line(widths.map((w) => '-'.repeat(w))));
  for (const row of rows) print(line(row));
}

export function count(n: number): string {
  return n.toLocaleString('en-US');
}

export function time(date: Date | null): string {
  return date ? date.toISOString() : '';
}
