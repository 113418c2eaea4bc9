// Waiting for a state in tests and benchmarks, in one place: polling a predicate, a promise that
// only an abort ends, and a writer that appends on a steady beat until stopped. None of these is
// a timing assertion: each waits for a state, and its timeout only bounds a stuck run.
import { performance } from 'node:perf_hooks';

export interface UntilOptions {
  /** Gives up after this long with an error naming what it waited for (default 30 s). */
  readonly timeoutMs?: number;
  /** Between checks (default 1 ms: a state reached between two event-loop turns is seen). */
  readonly intervalMs?: number;
}

/** Resolves once `predicate` holds; rejects naming `what` after the timeout. */
export async function until(
  predicate: () => boolean,
  what = 'condition',
  { timeoutMs = 30_000, intervalMs = 1 }: UntilOptions = {},
): Promise<void> {
  const giveUpAt = performance.now() + timeoutMs;
  while (!predicate()) {
    if (performance.now() > giveUpAt) {
      throw new Error(`gave up waiting for ${what} after ${String(timeoutMs)} ms`);
    }
    await new Promise<void>((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Never resolves; rejects with "aborted" when `signal` aborts (a watch the server keeps open). */
export function hang(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    signal.addEventListener(
      'abort',
      () => {
        reject(new Error('aborted'));
      },
      { once: true },
    );
  });
}

/** Calls `append` every `intervalMs` (after the previous append finished) until stopped. */
export function steadyWriter(
  append: () => Promise<void>,
  intervalMs = 30,
): { stop(): Promise<void> } {
  const writing = new AbortController();
  const done = (async () => {
    while (!writing.signal.aborted) {
      await append();
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  return {
    async stop() {
      writing.abort();
      await done;
    },
  };
}

/**
 * Lets every callback that is already due run (promise jobs, I/O callbacks, immediates), over
 * several rounds, so that a negative check after it ("nothing reopened") is not a race against a
 * short sleep on a loaded machine. Fake-clock timers are the test's to advance.
 */
export async function drainEventLoop(rounds = 20): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    await new Promise((resolve) => setImmediate(resolve));
  }
}
