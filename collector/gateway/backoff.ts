/** Reconnect delays: exponential growth between an initial and a maximum delay, with jitter. */
export interface BackoffOptions {
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
  /** Growth per consecutive failure; 2 doubles. */
  readonly multiplier?: number;
  /** Relative spread: 0.2 draws the delay from [0.8, 1.2] × the nominal delay. */
  readonly jitter?: number;
}

/** Nominal growth per failure (the Go agent doubles too). */
export const DEFAULT_BACKOFF_MULTIPLIER = 2;
/** ±20 %, as grpc-js and the Go agent do: enough to spread a fleet reconnecting at once. */
export const DEFAULT_BACKOFF_JITTER = 0.2;

/**
 * The delay before retry number `attempt` (0 = first retry). `random` returns [0, 1). The
 * result never exceeds `maxDelayMs` and never falls below `initialDelayMs × (1 - jitter)`, so
 * no sequence of failures can produce a tight loop.
 */
export function backoffDelay(
  options: BackoffOptions,
  attempt: number,
  random: () => number = Math.random,
): number {
  const multiplier = options.multiplier ?? DEFAULT_BACKOFF_MULTIPLIER;
  const jitter = options.jitter ?? DEFAULT_BACKOFF_JITTER;
  const initial = Math.max(1, options.initialDelayMs);
  const max = Math.max(initial, options.maxDelayMs);
  // Capping the exponent keeps the power finite for very long outages.
  const nominal = Math.min(max, initial * multiplier ** Math.min(attempt, 64));
  const factor = 1 - jitter + 2 * jitter * random();
  return Math.round(Math.min(max, nominal * factor));
}

/** Counts consecutive failures and turns them into delays; reset after a healthy session. */
export class Backoff {
  readonly #options: BackoffOptions;
  readonly #random: () => number;
  #attempt = 0;

  constructor(options: BackoffOptions, random: () => number = Math.random) {
    this.#options = options;
    this.#random = random;
  }

  /** Consecutive failures since the last reset. */
  get attempt(): number {
    return this.#attempt;
  }

  /** The delay before the next retry; each call counts one more failure. */
  next(): number {
    const delayMs = backoffDelay(this.#options, this.#attempt, this.#random);
    this.#attempt++;
    return delayMs;
  }

  reset(): void {
    this.#attempt = 0;
  }
}
