/**
 * The few checks the demo's queue validators need, written out so that the demo has no schema library to
 * install; an app would use the one it already has (README: Typed queues and validation, with zod or class-validator).
 * Each answers a reason, or undefined when the value is fine.
 */

export function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** A short description of a value for a refusal: its JSON, cut to 60 characters. */
export function shown(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'number') return String(value); // NaN and Infinity too, which JSON would show as null
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

export function integerProblem(name: string, value: unknown, min: number, max: number): string | undefined {
  return Number.isInteger(value) && (value as number) >= min && (value as number) <= max ? undefined : `${name} must be an integer from ${min} to ${max}, got ${shown(value)}`;
}

export function textProblem(name: string, value: unknown, { optional = false, nonEmpty = false } = {}): string | undefined {
  if (value === undefined && optional) return undefined;
  if (typeof value !== 'string') return `${name} must be a string, got ${shown(value)}`;
  return nonEmpty && value === '' ? `${name} must not be empty` : undefined;
}

/** The first problem of a payload: not an object, else the first field's. */
export function firstProblem(payload: unknown, expected: string, fields: (payload: Record<string, unknown>) => (string | undefined)[]): string | true {
  if (!isRecord(payload)) return `expected an object ${expected}, got ${shown(payload)}`;
  return fields(payload).find((problem) => problem !== undefined) ?? true;
}
