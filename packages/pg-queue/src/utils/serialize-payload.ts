import { PgQueueError } from '../errors/pg-queue.error.js';
import { PAYLOAD_NOT_JSON, PAYLOAD_TOO_LARGE } from '../pg-queue.messages.js';
import { errorLine, isInstanceOf } from './error-text.js';

/**
 * JSON text of a payload, or a clear error. JSON.stringify alone would silently drop functions and
 * undefined, turn NaN into null and Maps into {}, and throw a bare TypeError on BigInt or cycles:
 * the replacer refuses each of these by name and key before anything reaches the database.
 */
export function serializePayload(queue: string, payload: unknown, maxBytes: number): string {
  if (payload === undefined) throw new PgQueueError(PAYLOAD_NOT_JSON(queue, 'payload is undefined; pass null or an object'));
  const json = storableJson(payload, 'the payload', refusePayloadLoss, maxBytes);
  if (json.problem !== undefined) throw new PgQueueError(PAYLOAD_NOT_JSON(queue, json.problem));
  if (json.bytes > maxBytes) throw new PgQueueError(PAYLOAD_TOO_LARGE(queue, json.bytes, maxBytes));
  return json.text;
}

/**
 * A handler's result or progress as JSON text jsonb can store, under the same rules as a payload; the caller
 * words the error (an over-size or non-JSON result fails the attempt, a bad progress value throws).
 */
export function serializeValue(value: unknown, label: string, maxBytes: number): StorableJson {
  return storableJson(value, label, label === 'the result' ? refuseResultLoss : refuseValueLoss, maxBytes);
}

export type StorableJson = { text: string; bytes: number; problem?: undefined } | { problem: string; text?: undefined; bytes?: undefined };

function storableJson(value: unknown, label: string, replacer: (this: unknown, key: string, value: unknown) => unknown, maxBytes: number): StorableJson {
  let text: string;
  try {
    text = JSON.stringify(value, replacer);
  } catch (error) {
    if (isRefusal(error)) return { problem: error.message };
    const detail = thrownDetail(error);
    return { problem: /circular/i.test(detail) ? `circular reference: ${detail}` : detail };
  }
  if (text === undefined) return { problem: `${label} is undefined` }; // JSON.stringify(undefined)
  // jsonb refuses the escapes \u0000 and unpaired \ud800-\udfff; JSON.stringify writes \u only for control
  // characters and lone surrogates, so the common payload pays one substring search here.
  if (text.includes('\\u') && UNSTORABLE_ESCAPE.test(text)) return { problem: findUnstorable(value, label) };
  return { text, bytes: text.length <= maxBytes / 3 ? text.length : Buffer.byteLength(text) };
}

/** One of refuseLossy's own errors; false, not a throw, for a thrown value on which `instanceof` throws (a revoked Proxy). */
function isRefusal(error: unknown): error is PgQueueError {
  return isInstanceOf(error, PgQueueError);
}

/**
 * What a toJSON or a getter threw, as one line: an Error's message, else errorLine's text. Never throws: this
 * runs as a handler's result is stored, where a throw would leave the worker (a result whose toJSON throws a
 * revoked Proxy, or an Error whose message is a Symbol).
 */
function thrownDetail(error: unknown): string {
  try {
    if (error instanceof Error && typeof error.message === 'string') return error.message.split('\n')[0];
  } catch {
    // a revoked Proxy, a throwing message getter: errorLine reads what it can
  }
  return errorLine(error);
}

/** A real \u0000 or \udXXX escape: preceded by an even number of backslashes (so not the text `\\u0000`). */
const UNSTORABLE_ESCAPE = /(?<!\\)(?:\\\\)*\\u(?:0000|d[89a-f])/;

/** A code unit of a surrogate pair with no partner: JSON.stringify escapes it, jsonb refuses the escape. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

/** True when the text has a surrogate half without its partner (node-postgres would send it as U+FFFD). */
export function hasLoneSurrogate(text: string): boolean {
  return LONE_SURROGATE.test(text);
}

/** Second pass, only for a payload that has one: names the key whose string (or name) jsonb cannot store. */
function findUnstorable(payload: unknown, label: string): string {
  const problem = (text: string) =>
    text.includes('\u0000')
      ? 'the NUL character \\u0000, which jsonb cannot store'
      : LONE_SURROGATE.test(text)
        ? 'a lone UTF-16 surrogate (text cut inside a character pair), which jsonb cannot store'
        : undefined;
  let found = 'a string jsonb cannot store';
  try {
    JSON.stringify(payload, function (this: unknown, key: string, value: unknown) {
      const at = key === '' ? label : `key "${key.replaceAll('\u0000', '\uFFFD').replace(LONE_SURROGATES, '\uFFFD')}"`;
      const inName = !Array.isArray(this) && key !== '' && value !== undefined ? problem(key) : undefined;
      const inValue = typeof value === 'string' ? problem(value) : undefined;
      if (!inName && !inValue) return value;
      found = inName ? `the name of ${at} contains ${inName}` : `the string at ${at} contains ${inValue}`;
      throw new StopWalk();
    });
  } catch {
    // StopWalk once found; anything else (a toJSON or getter that throws on a second call) leaves the default
  }
  return found;
}

class StopWalk extends Error {}

/** JSON.stringify replacers, one per root label, made once (not per call: the enqueue path pays no closure). */
const refusePayloadLoss = lossyValueRefuser('the payload');
const refuseResultLoss = lossyValueRefuser('the result');
const refuseValueLoss = lossyValueRefuser('the value');

function lossyValueRefuser(label: string) {
  return function refuseLossyValues(this: unknown, key: string, value: unknown): unknown {
    return refuseLossy(this, key === '' ? label : `key "${key}"`, value);
  };
}

function refuseLossy(holder: unknown, at: string, value: unknown): unknown {
  switch (typeof value) {
    case 'bigint':
      throw new PgQueueError(`a BigInt at ${at}; convert it to a string or number first`);
    case 'function':
      throw new PgQueueError(`a function at ${at}`);
    case 'symbol':
      throw new PgQueueError(`a symbol at ${at}`);
    case 'number':
      if (!Number.isFinite(value)) throw new PgQueueError(`${value} at ${at}; JSON has no NaN or Infinity`);
      return value;
    case 'undefined':
      if (Array.isArray(holder)) throw new PgQueueError(`undefined at array index ${at}; JSON would turn it into null`);
      return value; // an undefined object property is simply absent, as in JSON.stringify
    case 'object':
      if (value instanceof Map || value instanceof Set) throw new PgQueueError(`a ${value.constructor.name} at ${at}; JSON would store it as {}`);
      return value;
    default:
      return value;
  }
}
