import { inspect } from 'node:util';

const MAX_ERROR_CHARS = 8_000;
/** A surrogate half without its partner (String.prototype.toWellFormed is ES2024; the build targets ES2023). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
/** What is left when even describing the value threw. */
const UNPRINTABLE = 'an unprintable value was thrown (describing it threw too)';

/** How many causes (`new Error(message, { cause })`, each the next one's) the text follows. */
const MAX_CAUSES = 5;

/**
 * A readable last_error for anything a handler throws: an Error's stack followed by its chain of causes ("Caused by:"
 * and each cause's stack, up to MAX_CAUSES), a string as is, and for junk
 * (null, numbers, Symbols, plain or circular objects) util.inspect. The result is always text PostgreSQL
 * stores: no NUL (text columns refuse U+0000), no lone surrogate, and the length cut never splits a surrogate
 * pair; one refused last_error once held a whole batch of outcomes back.
 *
 * Total: it never throws, whatever it is given. Handlers throw things whose every property access can throw
 * (a revoked Proxy, on which even `instanceof` throws; getters that throw; a `name` that is a Symbol, which
 * makes V8's lazily formatted `stack` throw; a throwing `toString` or `inspect.custom`), and this runs where
 * an exception would leave the worker and reach the host process.
 */
export function errorText(error: unknown): string {
  try {
    return storableText(rawText(error), MAX_ERROR_CHARS);
  } catch {
    return UNPRINTABLE;
  }
}

/** One line for logs; total like errorText. */
export function errorLine(error: unknown): string {
  try {
    return isError(error) ? headline(error) : errorText(error).split('\n', 1)[0];
  } catch {
    return UNPRINTABLE;
  }
}

/** Text PostgreSQL accepts, at most about maxChars long: NUL shown as \u0000, lone surrogates as U+FFFD. */
export function storableText(text: string, maxChars: number): string {
  let cut = text.length > maxChars ? text.slice(0, maxChars) : text;
  // A cut between the halves of a pair leaves a lone high surrogate: drop it rather than mangle it.
  if (cut.length < text.length && /[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  const clean = cut.replace(LONE_SURROGATE, '\uFFFD').replaceAll('\u0000', '\\u0000');
  return cut.length < text.length ? `${clean}... [truncated]` : clean;
}

function rawText(error: unknown): string {
  if (typeof error === 'string') return error;
  if (isError(error)) return stackOf(error) + causesOf(error);
  return `non-Error thrown: ${inspected(error)}`;
}

/**
 * The stack, when it is text; V8 formats it on first read, and that read throws when `name` or `message` cannot be
 * made a string. Otherwise the first line it would have had.
 */
function stackOf(error: Error): string {
  const stack = read(() => error.stack);
  return typeof stack === 'string' && stack !== '' ? stack : headline(error);
}

/**
 * The error's causes, each on lines of its own after "Caused by: " (an Error's stack, anything else as inspected): a
 * stack alone says where an error was rethrown, its cause where it began. A cause already shown ends the chain (a
 * cycle), and so does the MAX_CAUSES-th; errorText's length cut bounds the whole.
 */
function causesOf(error: Error): string {
  let text = '';
  const seen = new Set<unknown>([error]);
  let current: unknown = error;
  for (let i = 0; i < MAX_CAUSES; i++) {
    const cause = read(() => (current as { cause?: unknown }).cause);
    if (cause === undefined || seen.has(cause)) break;
    seen.add(cause);
    text += `\nCaused by: ${isError(cause) ? stackOf(cause) : typeof cause === 'string' ? cause : inspected(cause)}`;
    if (!isError(cause)) break;
    current = cause;
  }
  return text;
}

/** `instanceof`, false where asking throws (a revoked Proxy, a Proxy whose getPrototypeOf trap throws). */
export function isInstanceOf<T>(value: unknown, type: abstract new (...args: never[]) => T): value is T {
  try {
    return value instanceof type;
  } catch {
    return false;
  }
}

function isError(value: unknown): value is Error {
  return isInstanceOf(value, Error);
}

/** `name: message`, each read and made text without throwing. */
function headline(error: Error): string {
  const name = text(read(() => error.name), 'Error');
  const message = text(read(() => error.message), '');
  return message === '' ? name : `${name}: ${message}`;
}

/** What `get` returns, or undefined when it throws. */
function read(get: () => unknown): unknown {
  try {
    return get();
  } catch {
    return undefined;
  }
}

/** A property's value as text: strings as they are, Symbols as `Symbol(description)`, anything else inspected. */
function text(value: unknown, absent: string): string {
  if (value === undefined) return absent;
  if (typeof value === 'string') return value;
  if (typeof value === 'symbol') return value.toString();
  return inspected(value);
}

/**
 * util.inspect, which handles circular objects, Symbols, BigInt and revoked Proxies, but runs a value's own
 * `inspect.custom` and reads an Error's `stack`, either of which may throw: then without custom inspection,
 * then by type alone.
 */
function inspected(value: unknown): string {
  try {
    return inspect(value, { depth: 3, breakLength: Infinity });
  } catch {
    try {
      return inspect(value, { depth: 3, breakLength: Infinity, customInspect: false });
    } catch {
      return `[unprintable ${typeof value}]`;
    }
  }
}
