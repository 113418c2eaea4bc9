// One scrape loop: waits a random jitter in [0, interval) first, so that many targets configured
// together do not all fire in the same millisecond, then runs the task and waits whatever delay
// the task asks for next (the interval after a success, a backoff after a failure).
import type { Clock } from '../../../shared/clock.js';

export interface LoopOptions {
  readonly clock: Clock;
  readonly signal: AbortSignal;
  /** The first wait: a random share of the interval. */
  readonly initialDelayMs: number;
}

/**
 * Runs `task` until `signal` aborts. `task` returns the delay before its next run; it must not
 * throw (a throw is a bug: it is passed to `onBug` and the loop waits `fallbackDelayMs`).
 */
export async function runLoop(
  options: LoopOptions,
  task: (signal: AbortSignal) => Promise<number>,
  onBug: (err: unknown) => number,
): Promise<void> {
  const { clock, signal } = options;
  let delay = options.initialDelayMs;
  while (!signal.aborted) {
    try {
      await clock.sleep(delay, signal);
    } catch {
      return; // aborted
    }
    try {
      delay = await task(signal);
    } catch (err: unknown) {
      if (isAborted(signal)) return;
      delay = onBug(err);
    }
  }
}

/** Read through a call: the signal may abort while a task awaits. */
function isAborted(signal: AbortSignal): boolean {
  return signal.aborted;
}

/** A jitter in [0, intervalMs). */
export function initialJitter(intervalMs: number, random: () => number = Math.random): number {
  return Math.floor(random() * intervalMs);
}
