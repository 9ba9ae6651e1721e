import { inspect } from 'node:util';

const MAX_ERROR_CHARS = 8_000;

/**
 * A readable last_error for anything a handler throws: an Error's stack, a string as is, and for junk
 * (null, numbers, plain or circular objects) util.inspect, which never throws.
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
  return text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)}... [truncated]` : text;
}

/** One line for logs. */
export function errorLine(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return errorText(error).split('\n', 1)[0];
}
