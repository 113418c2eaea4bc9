import type { Clock } from '../../shared/clock.js';

/**
 * Lets one party cut another's sleep short: a loop sleeping on a heartbeat interval or a
 * backpressure delay wakes when that interval or delay is changed, and sleeps again with the
 * new value.
 */
export class Wakeup {
  #controller = new AbortController();

  wake(): void {
    this.#controller.abort();
    this.#controller = new AbortController();
  }

  /** Sleeps `ms`; returns true if it slept the full time, false if woken. Rejects on abort. */
  async sleep(clock: Clock, ms: number, signal: AbortSignal): Promise<boolean> {
    const woken = this.#controller.signal;
    try {
      await clock.sleep(ms, AbortSignal.any([signal, woken]));
      return true;
    } catch (err: unknown) {
      if (signal.aborted || !woken.aborted) throw err;
      return false;
    }
  }
}
