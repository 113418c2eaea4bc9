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

/** The real clock: timers are unref'd so a pending sleep never keeps the process alive. */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: async (ms, signal) => {
    await delay(Math.max(0, ms), undefined, { signal, ref: false });
  },
};
