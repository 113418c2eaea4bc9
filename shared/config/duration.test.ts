import { describe, expect, it } from 'vitest';
import { formatDuration, isDuration, parseDuration } from './duration.js';

describe('parseDuration', () => {
  it.each([
    ['10s', 10_000],
    ['1m30s', 90_000],
    ['500ms', 500],
    ['0', 0],
    ['+0', 0],
    ['1h', 3_600_000],
    ['1.5s', 1_500],
    ['.5m', 30_000],
    ['1h2m3s4ms', 3_723_004],
    ['1500us', 1.5],
    ['1500µs', 1.5],
    ['1500μs', 1.5],
    ['2000000ns', 2],
    ['-5s', -5_000],
  ])('reads %s as %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['30', '', 's', '1d', '1 s', '10S', '1m 30s', 'abc', '.s', '1.2.3s'])(
    'refuses %j: the unit is required and only Go units exist',
    (text) => {
      expect(isDuration(text)).toBe(false);
      expect(() => parseDuration(text)).toThrow(RangeError);
    },
  );
});

describe('formatDuration', () => {
  it.each([
    [0, '0'],
    [500, '500ms'],
    [1_000, '1s'],
    [1_500, '1.5s'],
    [90_000, '1m30s'],
    [3_600_000, '1h'],
    [3_723_004, '1h2m3.004s'],
    [300_000, '5m'],
  ])('writes %d ms as %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('round-trips through parseDuration', () => {
    for (const ms of [0, 1, 999, 1_000, 59_999, 60_000, 61_001, 3_599_999, 86_400_000]) {
      expect(parseDuration(formatDuration(ms))).toBe(ms);
    }
  });
});
