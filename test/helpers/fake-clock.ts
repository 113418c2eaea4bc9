import type { Clock } from '../../shared/clock.js';

interface Sleeper {
  readonly ms: number;
  readonly wakeAt: number;
  readonly resolve: () => void;
}

/**
 * A Clock that only moves when a test calls advance(). Every requested sleep is recorded, so
 * tests assert on the delays a component asked for instead of measuring real time.
 */
export class FakeClock implements Clock {
  #now: number;
  #sleepers: Sleeper[] = [];
  #listeners: ((ms: number) => void)[] = [];
  /** Every sleep requested, in order, in milliseconds. */
  readonly sleeps: number[] = [];

  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(toError(signal.reason));
    this.sleeps.push(ms);
    return new Promise<void>((resolve, reject) => {
      const sleeper: Sleeper = {
        ms,
        wakeAt: this.#now + Math.max(0, ms),
        resolve: () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        this.#sleepers = this.#sleepers.filter((s) => s !== sleeper);
        reject(toError(signal.reason));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#sleepers.push(sleeper);
      for (const listener of [...this.#listeners]) listener(ms);
    });
  }

  /** Durations of the sleeps still pending. */
  pending(): number[] {
    return this.#sleepers.map((s) => s.ms);
  }

  /** Moves time forward and wakes every sleeper that is due. */
  advance(ms: number): void {
    this.#now += ms;
    const due = this.#sleepers.filter((s) => s.wakeAt <= this.#now);
    this.#sleepers = this.#sleepers.filter((s) => s.wakeAt > this.#now);
    for (const sleeper of due) sleeper.resolve();
  }

  /**
   * Resolves with the duration of the first sleep matching `predicate` that is pending now or
   * requested later.
   */
  waitForSleep(predicate: (ms: number) => boolean): Promise<number> {
    const pending = this.pending().find(predicate);
    if (pending !== undefined) return Promise.resolve(pending);
    return new Promise<number>((resolve) => {
      const listener = (ms: number): void => {
        if (!predicate(ms)) return;
        this.#listeners = this.#listeners.filter((l) => l !== listener);
        resolve(ms);
      };
      this.#listeners.push(listener);
    });
  }
}

function toError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(String(reason));
}
