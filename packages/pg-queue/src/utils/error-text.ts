import { inspect } from 'node:util';

const MAX_ERROR_CHARS = 8_000;
/** A surrogate half without its partner (String.prototype.toWellFormed is ES2024; the build targets ES2023). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * A readable last_error for anything a handler throws: an Error's stack, a string as is, and for junk
 * (null, numbers, plain or circular objects) util.inspect, which never throws. The result is always text
 * PostgreSQL stores: no NUL (text columns refuse U+0000), no lone surrogate, and the length cut never
 * splits a surrogate pair; one refused last_error once held a whole batch of outcomes back.
 */
export function errorText(error: unknown): string {
  let text: string;
  if (error instanceof Error) {
    text = error.stack ?? `${error.name}: ${error.message}`;
  } else if (typeof error === 'string') {
    text = error;
  } else {
    text = `non-Error thrown: ${inspect(error, { depth: 3, breakLength: Infinity })}`;
  }
  return storableText(text, MAX_ERROR_CHARS);
}

/** Text PostgreSQL accepts, at most about maxChars long: NUL shown as \u0000, lone surrogates as U+FFFD. */
export function storableText(text: string, maxChars: number): string {
  let cut = text.length > maxChars ? text.slice(0, maxChars) : text;
  // A cut between the halves of a pair leaves a lone high surrogate: drop it rather than mangle it.
  if (cut.length < text.length && /[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  const clean = cut.replace(LONE_SURROGATE, '\uFFFD').replaceAll('\u0000', '\\u0000');
  return cut.length < text.length ? `${clean}... [truncated]` : clean;
}

/** One line for logs. */
export function errorLine(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return errorText(error).split('\n', 1)[0];
}
