import { describe, expect, it } from 'vitest';
import { bytes, nanocores } from './quantity.js';

describe('Kubernetes quantities', () => {
  it.each([
    ['1500500n', 1_500_500n],
    ['250m', 250_000_000n],
    ['1', 1_000_000_000n],
    ['2.5', 2_500_000_000n],
    ['0.1', 100_000_000n],
    ['1u', 1000n],
    ['1e-3', 1_000_000n],
    // Below a nanocore rounds up, as ScaledValue does.
    ['0.0000000001', 1n],
    ['0', 0n],
  ])('cpu %s is %d nanocores', (text, expected) => {
    expect(nanocores(text)).toBe(expected);
  });

  it.each([
    ['64Mi', 67_108_864n],
    ['1Gi', 1_073_741_824n],
    ['1.5Ki', 1536n],
    ['1k', 1000n],
    ['128974848', 128_974_848n],
    ['129e6', 129_000_000n],
    ['1E', 1_000_000_000_000_000_000n],
    ['8Ei', 9_223_372_036_854_775_808n],
  ])('memory %s is %d bytes', (text, expected) => {
    expect(bytes(text)).toBe(expected);
  });

  it('sums container usage without float drift', () => {
    // 0.1 + 0.2 cores in floating point is 300000000.00000006 nanocores.
    expect(nanocores('0.1') + nanocores('0.2')).toBe(300_000_000n);
  });

  it.each(['', 'abc', '1.2.3', '5Xi', '1e', 'm', '--1', '1.5e3m'])('refuses %j', (text) => {
    expect(() => nanocores(text)).toThrow(/not a Kubernetes quantity/);
  });
});
