/** Writes to stdout; the command's result (tables, JSON). Notes and progress go to stderr. */
export function print(line = ''): void {
  process.stdout.write(`${line}\n`);
}

export function note(line: string): void {
  process.stderr.write(`${line}\n`);
}

export function printJson(value: unknown): void {
  print(JSON.stringify(value, null, 2));
}

/** Columns padded to their widest cell; numbers (right-aligned) where every cell but the header is numeric. */
export function printTable(header: string[], rows: string[][]): void {
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
