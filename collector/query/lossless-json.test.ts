import { describe, expect, it } from 'vitest';
import { parseLossless, stringifyLossless } from './lossless-json.js';

describe('lossless JSON', () => {
  it('keeps integers beyond 2^53 byte-identical through parse and stringify', () => {
    const text =
      '{"cells":[9223372036854775807,-9223372036854775808,18446744073709551615,42,1.5],"s":"12345678901234567890","e":"a\\"99999999999999999999"}';
    const value = parseLossless(text) as { s: string };
    expect(stringifyLossless(value)).toBe(text);
    expect(value.s).toBe('12345678901234567890');
  });

  it('leaves long fractions and exponents to the double, as the API server does', () => {
    expect(stringifyLossless(parseLossless('[0.12345678901234567891]'))).toBe(
      '[0.12345678901234568]',
    );
  });

  it('is JSON.parse for text without long numbers', () => {
    const text = '{"a":[1,2,{"b":"c"}]}';
    expect(parseLossless(text)).toEqual(JSON.parse(text));
  });
});
