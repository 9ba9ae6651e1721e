import { describe, expect, it } from '@jest/globals';
import { serializePayload, serializeValue } from '../../src/utils/serialize-payload.js';

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
  it('keeps text that only looks like an escape: a backslash followed by u0000 or ud800, and paired surrogates', () => {
    const payload = { path: 'C:\\u0000\\new', re: '\\\\u0000', odd: '\\ud800', emoji: '😀 \uD83D\uDE00', ctl: '\u0001' };
    expect(JSON.parse(serializePayload('q', payload, 1_000))).toEqual(payload);
  });
  it.each([
    [{ s: 'a\u0000b' }, 'the string at key "s" contains the NUL character'],
    [{ list: ['ok', 'x\\\u0000'] }, 'the string at key "1" contains the NUL character'],
    [{ cut: 'ab\uD83D' }, 'the string at key "cut" contains a lone UTF-16 surrogate'],
    [{ low: '\uDE00x' }, 'the string at key "low" contains a lone UTF-16 surrogate'],
    [{ ['k\uD800']: 1 }, 'the name of key "k\uFFFD" contains a lone UTF-16 surrogate'],
    [{ ['k\u0000']: 1 }, 'the name of key "k\uFFFD" contains the NUL character'],
    ['\uD800', 'the string at the payload contains a lone UTF-16 surrogate'],
  ])('refuses what jsonb cannot store, naming the key: %p', (payload, message) => {
    expect(() => serializePayload('q', payload, 1_000)).toThrow(message);
  });
  it('measures the limit in UTF-8 bytes', () => {
    expect(() => serializePayload('q', 'é'.repeat(10), 21)).toThrow('is 22 bytes as JSON, over the maxPayloadBytes limit of 21');
    expect(serializePayload('q', 'é'.repeat(10), 22)).toHaveLength(12);
  });
});

describe('serializeValue: a handler result that throws while it is serialised is refused, never thrown', () => {
  const revoked = () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    return proxy;
  };
  const symbolMessage = new Error();
  (symbolMessage as { message: unknown }).message = Symbol('why');
  it.each([
    ['a revoked Proxy', revoked(), 'on a proxy that has been revoked'],
    ['a revoked Proxy inside it', { inner: revoked() }, 'revoked'],
    ['a toJSON that throws a revoked Proxy', { toJSON: () => { throw revoked(); } }, 'non-Error thrown: <Revoked Proxy>'],
    ['a toJSON that throws a Symbol', { toJSON: () => { throw Symbol('junk'); } }, 'non-Error thrown: Symbol(junk)'],
    ['a toJSON that throws an Error whose message is a Symbol', { toJSON: () => { throw symbolMessage; } }, 'Error: Symbol(why)'],
    ['a getter that throws an object whose toString throws', { get bad() { throw { toString: () => { throw new Error('no'); } }; } }, 'non-Error thrown: {'],
  ])('%s', (_what, value, problem) => {
    let json: ReturnType<typeof serializeValue> | undefined;
    expect(() => (json = serializeValue(value, 'the result', 1_000))).not.toThrow();
    expect(json!.problem).toContain(problem);
  });
});
