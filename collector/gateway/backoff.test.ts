import { describe, expect, it } from 'vitest';
import { Backoff, backoffDelay } from './backoff.js';

const options = { initialDelayMs: 1000, maxDelayMs: 15_000 };

describe('backoffDelay', () => {
  it('doubles from the initial delay up to the max with centred jitter', () => {
    const delays = [0, 1, 2, 3, 4, 5].map((attempt) => backoffDelay(options, attempt, () => 0.5));
    expect(delays).toEqual([1000, 2000, 4000, 8000, 15_000, 15_000]);
  });

  it('spreads delays by ±20 % and never exceeds the max', () => {
    expect(backoffDelay(options, 0, () => 0)).toBe(800);
    expect(backoffDelay(options, 0, () => 0.999_999)).toBe(1200);
    expect(backoffDelay(options, 10, () => 0.999_999)).toBe(15_000);
  });

  it('never produces a tight loop, whatever the inputs', () => {
    expect(backoffDelay({ initialDelayMs: 0, maxDelayMs: 0 }, 0, () => 0)).toBeGreaterThan(0);
    expect(backoffDelay(options, 10_000, () => 0)).toBe(12_000);
    expect(Number.isFinite(backoffDelay(options, Number.MAX_SAFE_INTEGER))).toBe(true);
  });
});

describe('Backoff', () => {
  it('counts failures and starts over after reset', () => {
    const backoff = new Backoff(options, () => 0.5);
    expect([backoff.next(), backoff.next(), backoff.next()]).toEqual([1000, 2000, 4000]);
    expect(backoff.attempt).toBe(3);
    backoff.reset();
    expect(backoff.next()).toBe(1000);
  });
});
