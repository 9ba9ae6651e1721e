import { describe, expect, it } from '@jest/globals';
import { inspect } from 'node:util';
import { errorLine, errorText } from '../../src/utils/error-text.js';

const wellFormed = (s: string) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

describe('errorText: a last_error PostgreSQL stores', () => {
  it('shows NUL as the text \\u0000 (text columns and jsonb refuse the character)', () => {
    const text = errorText(new SyntaxError('Unexpected token \u0000 in JSON'));
    expect(text).not.toContain('\u0000');
    expect(text).toContain('Unexpected token \\u0000 in JSON');
  });
  it('never cuts a surrogate pair in two at the length limit', () => {
    const error = new Error('x');
    error.stack = 'E'.repeat(7_999) + '😀'.repeat(100); // char 7,999 is the high half of a pair
    const text = errorText(error);
    expect(wellFormed(text)).toBe(true);
    expect(text).toBe(`${'E'.repeat(7_999)}... [truncated]`);
    error.stack = 'E'.repeat(7_998) + '😀'.repeat(100); // the cut falls between two pairs: the pair stays
    expect(errorText(error)).toBe(`${'E'.repeat(7_998)}😀... [truncated]`);
  });
  it('replaces lone surrogates with U+FFFD and keeps pairs', () => {
    expect(errorText('a\uD800b\uDC00c😀')).toBe('a\uFFFDb\uFFFDc😀');
    expect(wellFormed(errorText({ s: '\uDBFF' }))).toBe(true);
  });
  it('leaves ordinary text alone', () => {
    expect(errorText('plain')).toBe('plain');
    expect(errorText('x'.repeat(8_000))).toBe('x'.repeat(8_000));
  });
});

describe('errorText: the whole error, its causes included', () => {
  it('follows the chain of causes after the stack, each as "Caused by:" and its own stack', () => {
    const root = new Error('connection reset');
    root.stack = 'Error: connection reset\n    at socket';
    const middle = new TypeError('gateway failed', { cause: root });
    middle.stack = 'TypeError: gateway failed\n    at gateway';
    const top = new Error('charge failed', { cause: middle });
    top.stack = 'Error: charge failed\n    at charge';
    expect(errorText(top)).toBe('Error: charge failed\n    at charge\nCaused by: TypeError: gateway failed\n    at gateway\nCaused by: Error: connection reset\n    at socket');
    expect(errorLine(top)).toBe('Error: charge failed');
  });
  it('shows a cause that is not an Error as it is (a string) or inspected, and stops there', () => {
    expect(errorText(Object.assign(new Error('a'), { stack: 'Error: a', cause: 'the upstream said no' }))).toBe('Error: a\nCaused by: the upstream said no');
    expect(errorText(Object.assign(new Error('b'), { stack: 'Error: b', cause: { status: 503 } }))).toBe('Error: b\nCaused by: { status: 503 }');
  });
  it('stops at a cycle, after at most five causes, and when reading the cause throws; the whole stays within the bound', () => {
    const a = Object.assign(new Error('a'), { stack: 'Error: a' });
    const b = Object.assign(new Error('b', { cause: a }), { stack: 'Error: b' });
    (a as { cause?: unknown }).cause = b;
    expect(errorText(a)).toBe('Error: a\nCaused by: Error: b');
    let deep: Error = Object.assign(new Error('e0'), { stack: 'Error: e0' });
    for (let i = 1; i <= 8; i++) deep = Object.assign(new Error(`e${i}`, { cause: deep }), { stack: `Error: e${i}` });
    expect(errorText(deep).split('\n')).toEqual(['Error: e8', 'Caused by: Error: e7', 'Caused by: Error: e6', 'Caused by: Error: e5', 'Caused by: Error: e4', 'Caused by: Error: e3']);
    const throwingCause = Object.assign(new Error('c'), { stack: 'Error: c' });
    Object.defineProperty(throwingCause, 'cause', { get: throwing('cause') });
    expect(expectTotal(throwingCause).text).toBe('Error: c');
    const long = Object.assign(new Error('long', { cause: Object.assign(new Error('x'), { stack: 'x'.repeat(10_000) }) }), { stack: 'Error: long' });
    expect(errorText(long)).toMatch(/^Error: long\nCaused by: x+\.\.\. \[truncated\]$/);
    expect(errorText(long).length).toBeLessThanOrEqual(8_000 + '... [truncated]'.length);
  });
});

/** A revoked Proxy: every operation on it throws, `instanceof` included. */
function revokedProxy(target: object = {}): object {
  const { proxy, revoke } = Proxy.revocable(target, {});
  revoke();
  return proxy;
}

const throwing = (what: string) => () => {
  throw new Error(`${what} getter threw`);
};

/** Both functions on one value: neither throws, and each gives one readable, storable line at least. */
function expectTotal(value: unknown): { text: string; line: string } {
  let text = '';
  let line = '';
  expect(() => (text = errorText(value))).not.toThrow();
  expect(() => (line = errorLine(value))).not.toThrow();
  for (const s of [text, line]) {
    expect(typeof s).toBe('string');
    expect(s.trim()).not.toBe('');
    expect(wellFormed(s)).toBe(true);
  }
  expect(line).not.toContain('\n');
  return { text, line };
}

describe('errorText and errorLine are total: junk a handler throws never makes them throw', () => {
  it('an Error whose stack is not a string: a number, an object, a getter that throws', () => {
    const number = new TypeError('stack is a number');
    (number as { stack: unknown }).stack = 42;
    expect(expectTotal(number)).toEqual({ text: 'TypeError: stack is a number', line: 'TypeError: stack is a number' });

    const object = new Error('stack is an object');
    (object as { stack: unknown }).stack = { frames: [] };
    expect(expectTotal(object).text).toBe('Error: stack is an object');

    const getter = new RangeError('stack getter throws');
    Object.defineProperty(getter, 'stack', { get: throwing('stack') });
    expect(expectTotal(getter)).toEqual({ text: 'RangeError: stack getter throws', line: 'RangeError: stack getter throws' });
  });

  it('an Error whose name or message is a Symbol (V8 then throws on reading its stack) or a throwing getter', () => {
    const symbolName = new Error('named by a symbol');
    (symbolName as { name: unknown }).name = Symbol('junk');
    expect(() => symbolName.stack).toThrow('Cannot convert a Symbol value to a string'); // what the worker met: the stack itself throws
    expect(expectTotal(symbolName)).toEqual({ text: 'Symbol(junk): named by a symbol', line: 'Symbol(junk): named by a symbol' });

    const symbolMessage = new Error();
    (symbolMessage as { message: unknown }).message = Symbol.for('why');
    expect(expectTotal(symbolMessage).line).toBe('Error: Symbol(why)');

    class GetterName extends Error {
      override get name(): string {
        throw new Error('name getter threw');
      }
    }
    expect(expectTotal(new GetterName('its name throws')).line).toBe('Error: its name throws');

    const getterMessage = new SyntaxError('x');
    Object.defineProperty(getterMessage, 'stack', { value: undefined });
    Object.defineProperty(getterMessage, 'message', { get: throwing('message') });
    expect(expectTotal(getterMessage).line).toBe('SyntaxError');
  });

  it('a revoked Proxy (instanceof, util.inspect of an Error, String() all throw on one), alone or inside an object', () => {
    const revoked = revokedProxy();
    expect(() => revoked instanceof Error).toThrow('revoked');
    expect(expectTotal(revoked)).toEqual({ text: 'non-Error thrown: <Revoked Proxy>', line: 'non-Error thrown: <Revoked Proxy>' });
    expect(expectTotal(revokedProxy(new Error('was an Error'))).text).toBe('non-Error thrown: <Revoked Proxy>');
    expect(expectTotal({ inner: revoked }).text).toBe('non-Error thrown: { inner: <Revoked Proxy> }');
    // A revoked Proxy as an Error's name or message.
    const error = new Error('m');
    Object.defineProperty(error, 'stack', { value: null });
    (error as { name: unknown }).name = revoked;
    expect(expectTotal(error).line).toBe('<Revoked Proxy>: m');
  });

  it('a live Proxy whose every trap throws, around an Error or a plain object', () => {
    const traps = Object.fromEntries(
      ['get', 'getPrototypeOf', 'has', 'ownKeys', 'getOwnPropertyDescriptor', 'apply'].map((trap) => [trap, throwing(trap)]),
    ) as ProxyHandler<object>;
    expectTotal(new Proxy(new Error('hidden'), traps));
    expectTotal(new Proxy({ a: 1 }, traps));
  });

  it('objects with a throwing toString, Symbol.toPrimitive or inspect.custom', () => {
    const primitive = { toString: throwing('toString'), [Symbol.toPrimitive]: throwing('toPrimitive'), valueOf: throwing('valueOf') };
    expect(expectTotal(primitive).text).toMatch(/^non-Error thrown: \{/);
    const custom = { kind: 'custom', [inspect.custom]: throwing('inspect.custom') };
    expect(expectTotal(custom).text).toMatch(/^non-Error thrown: \{.*kind: 'custom'/);
    // The same as an Error's name and message, with no stack to fall back on.
    const error = new Error();
    Object.defineProperty(error, 'stack', { value: 7 });
    Object.defineProperty(error, 'name', { value: custom });
    Object.defineProperty(error, 'message', { value: primitive });
    expect(expectTotal(error).line).toMatch(/^\{.*kind: 'custom'.*\}: \{/);
    // An Error with a throwing inspect.custom is read by its stack, not inspected.
    const inspectedError = Object.assign(new Error('custom inspect on an Error'), { [inspect.custom]: throwing('inspect.custom') });
    expect(expectTotal(inspectedError).line).toBe('Error: custom inspect on an Error');
  });

  it('Symbols, BigInt, null, undefined, functions and circular objects', () => {
    expect(expectTotal(Symbol('thrown'))).toEqual({ text: 'non-Error thrown: Symbol(thrown)', line: 'non-Error thrown: Symbol(thrown)' });
    expect(expectTotal(Symbol()).text).toBe('non-Error thrown: Symbol()');
    expect(expectTotal(10n ** 30n).text).toBe('non-Error thrown: 1000000000000000000000000000000n');
    expect(expectTotal(null).text).toBe('non-Error thrown: null');
    expect(expectTotal(undefined).text).toBe('non-Error thrown: undefined');
    expect(expectTotal(function thrower() {}).text).toBe('non-Error thrown: [Function: thrower]');
    const circular: Record<string, unknown> = { name: 'loop' };
    circular.self = circular;
    expect(expectTotal(circular).text).toBe("non-Error thrown: <ref *1> { name: 'loop', self: [Circular *1] }");
    const circularError = new Error('loop');
    (circularError as { stack: unknown }).stack = circularError;
    expect(expectTotal(circularError).text).toBe('Error: loop');
  });

  it('an ordinary Error: its stack, and one line for logs', () => {
    const error = new TypeError('plain');
    expect(expectTotal(error)).toEqual({ text: error.stack, line: 'TypeError: plain' });
    expect(expectTotal(new Error()).line).toBe('Error');
  });
});
