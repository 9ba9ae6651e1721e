import { describe, expect, it } from '@jest/globals';
import { serializePayload } from '../../src/utils/serialize-payload.js';

describe('serializePayload', () => {
  it('keeps what JSON keeps: Dates as ISO strings, nested arrays, null, unicode', () => {
    const text = serializePayload('q', { at: new Date('2026-01-02T03:04:05Z'), list: [1, 'two', null], name: 'Zoë ✉' }, 1_000);
    expect(JSON.parse(text)).toEqual({ at: '2026-01-02T03:04:05.000Z', list: [1, 'two', null], name: 'Zoë ✉' });
    expect(serializePayload('q', null, 10)).toBe('null');
  });
  it.each([
    [{ a: [1, undefined] }, 'undefined at array index key "1"'],
    [{ s: Symbol('x') }, 'a symbol at key "s"'],
    [{ n: Infinity }, 'Infinity at key "n"'],
    [{ s: new Set([1]) }, 'a Set at key "s"'],
    [{ s: 'a\u0000b' }, 'NUL character'],
    [10n, 'a BigInt at the payload'],
  ])('refuses %p', (payload, message) => {
    expect(() => serializePayload('q', payload, 1_000)).toThrow(message);
  });
  it('measures the limit in UTF-8 bytes', () => {
    expect(() => serializePayload('q', 'é'.repeat(10), 21)).toThrow('is 22 bytes as JSON, over the maxPayloadBytes limit of 21');
    expect(serializePayload('q', 'é'.repeat(10), 22)).toHaveLength(12);
  });
});
