// A service that looks at something on a fixed interval until it is stopped: the heap watch and
// the idle collection. The loop sleeps on the injected clock (tests drive it with a fake one) and
// stops at the start signal's abort or at close(), whichever comes first.
import type { Clock } from '../../shared/clock.js';
import type { Service } from '../../shared/lifecycle/service.js';

export interface PeriodicOptions {
  readonly name: string;
  readonly intervalMs: number;
  readonly clock: Clock;
  /** Look once at start, before the first sleep (default: the first look after one interval). */
  readonly lookAtStart?: boolean;
}

export function periodicService(options: PeriodicOptions, look: () => void): Service {
  const lifetime = new AbortController();
  let loop: Promise<void> | undefined;
  return {
    name: options.name,
    start(signal: AbortSignal): Promise<void> {
      const stop = (): void => {
        lifetime.abort();
      };
      if (signal.aborted) stop();
      else signal.addEventListener('abort', stop, { once: true });
      loop = (async () => {
        if (options.lookAtStart === true && !lifetime.signal.aborted) look();
        while (!lifetime.signal.aborted) {
          const slept = await options.clock.sleep(options.intervalMs, lifetime.signal).then(
            () => true,
            () => false,
          );
          if (slept) look();
        }
      })();
      return Promise.resolve();
    },
    async close(): Promise<void> {
      lifetime.abort();
      await loop;
    },
  };
}
