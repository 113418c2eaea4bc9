import { setTimeout as delay } from 'node:timers/promises';

/**
 * Time as components see it. Backoff, heartbeats and pacing take one, so tests drive time
 * with a fake instead of sleeping.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms`; rejects with the abort reason when `signal` aborts first. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

/**
 * The longest delay one Node timer can hold (2^31 - 1 ms, about 24.8 days). Node turns a larger
 * delay, and NaN, into 1 ms, so an oversized interval would fire every millisecond.
 */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/** A delay one Node timer can take: NaN and negatives become 0, anything larger is capped. */
export function clampTimerDelay(ms: number): number {
  if (Number.isNaN(ms) || ms <= 0) return 0;
  return Math.min(ms, MAX_TIMER_DELAY_MS);
}

/**
 * The real clock: timers are unref'd so a pending sleep never keeps the process alive. A sleep
 * longer than one timer can hold is served as consecutive timers of at most MAX_TIMER_DELAY_MS
 * (Infinity sleeps until the signal aborts), never as Node's 1 ms fallback.
 */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: async (ms, signal) => {
    let remaining = Number.isNaN(ms) ? 0 : Math.max(0, ms);
    do {
      const step = clampTimerDelay(remaining);
      await delay(step, undefined, { signal, ref: false });
      remaining -= step;
    } while (remaining > 0);
  },
};
