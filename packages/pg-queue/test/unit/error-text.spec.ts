import { describe, expect, it } from '@jest/globals';
import { errorText } from '../../src/utils/error-text.js';

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
