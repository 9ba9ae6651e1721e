import { PgQueueError } from '../errors/pg-queue.error.js';
import { PAYLOAD_NOT_JSON, PAYLOAD_TOO_LARGE } from '../pg-queue.messages.js';

/**
 * JSON text of a payload, or a clear error. JSON.stringify alone would silently drop functions and
 * undefined, turn NaN into null and Maps into {}, and throw a bare TypeError on BigInt or cycles:
 * the replacer refuses each of these by name and key before anything reaches the database.
 */
export function serializePayload(queue: string, payload: unknown, maxBytes: number): string {
  if (payload === undefined) throw new PgQueueError(PAYLOAD_NOT_JSON(queue, 'payload is undefined; pass null or an object'));
  let text: string;
  try {
    text = JSON.stringify(payload, refuseLossyValues);
  } catch (error) {
    if (error instanceof PgQueueError) throw new PgQueueError(PAYLOAD_NOT_JSON(queue, error.message));
    const detail = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw new PgQueueError(PAYLOAD_NOT_JSON(queue, /circular/i.test(detail) ? `circular reference: ${detail}` : detail));
  }
  // Postgres jsonb rejects \u0000 in strings; say so here rather than as a driver error.
  if (text.includes('\\u0000')) throw new PgQueueError(PAYLOAD_NOT_JSON(queue, 'a string contains the NUL character \\u0000, which jsonb cannot store'));
  const bytes = text.length <= maxBytes / 3 ? text.length : Buffer.byteLength(text);
  if (bytes > maxBytes) throw new PgQueueError(PAYLOAD_TOO_LARGE(queue, bytes, maxBytes));
  return text;
}

function refuseLossyValues(this: unknown, key: string, value: unknown): unknown {
  const at = key === '' ? 'the payload' : `key "${key}"`;
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
      if (Array.isArray(this)) throw new PgQueueError(`undefined at array index ${at}; JSON would turn it into null`);
      return value; // an undefined object property is simply absent, as in JSON.stringify
    case 'object':
      if (value instanceof Map || value instanceof Set) throw new PgQueueError(`a ${value.constructor.name} at ${at}; JSON would store it as {}`);
      return value;
    default:
      return value;
  }
}
