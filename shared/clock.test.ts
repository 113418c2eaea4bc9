import { describe, expect, it } from 'vitest';
import { clampTimerDelay, MAX_TIMER_DELAY_MS, systemClock } from './clock.js';

describe('clampTimerDelay', () => {
  it('keeps ordinary delays, caps oversized ones, and zeroes NaN and negatives', () => {
    expect(clampTimerDelay(1500)).toBe(1500);
    expect(clampTimerDelay(MAX_TIMER_DELAY_MS)).toBe(MAX_TIMER_DELAY_MS);
    expect(clampTimerDelay(MAX_TIMER_DELAY_MS + 1)).toBe(MAX_TIMER_DELAY_MS);
    expect(clampTimerDelay(Number.POSITIVE_INFINITY)).toBe(MAX_TIMER_DELAY_MS);
    expect(clampTimerDelay(Number.NaN)).toBe(0);
    expect(clampTimerDelay(-5)).toBe(0);
  });
});

describe('systemClock.sleep', () => {
  const settledWithin = async (promise: Promise<void>, ms: number): Promise<boolean> => {
    let settled = false;
    promise.then(
      () => (settled = true),
      () => (settled = true),
    );
    await new Promise((resolve) => setTimeout(resolve, ms));
    return settled;
  };

  it.each([2 ** 31, 2 ** 32 * 1000, Number.POSITIVE_INFINITY])(
    'does not turn a %d ms sleep into 1 ms; it waits until aborted',
    async (ms) => {
      const controller = new AbortController();
      const sleep = systemClock.sleep(ms, controller.signal);
      expect(await settledWithin(sleep, 50)).toBe(false);
      controller.abort(new Error('stop'));
      await expect(sleep).rejects.toMatchObject({ name: 'AbortError' });
    },
  );

  it('still resolves short sleeps, and NaN as no sleep', async () => {
    const signal = new AbortController().signal;
    await expect(systemClock.sleep(5, signal)).resolves.toBeUndefined();
    await expect(systemClock.sleep(Number.NaN, signal)).resolves.toBeUndefined();
  });
});
