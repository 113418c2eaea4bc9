// Per-stream token bucket over bytes (the gateway's ingest rules: per_stream_rate_bytes and
// per_stream_burst_bytes). A new bucket starts full; the refill is capped at the burst.

export interface RateLimit {
  /** Bytes per second; <= 0 together with burst <= 0 means unlimited. */
  readonly ratePerSecond: number;
  readonly burst: number;
}

export class TokenBucket {
  readonly #limit: RateLimit;
  #tokens: number;
  #updatedAtMs: number;

  constructor(limit: RateLimit, nowMs: number) {
    this.#limit = limit;
    this.#tokens = limit.burst;
    this.#updatedAtMs = nowMs;
  }

  /** True when the limit is off: no bucket is needed at all. */
  static isUnlimited(limit: RateLimit): boolean {
    return limit.ratePerSecond <= 0 || limit.burst <= 0;
  }

  /** Takes `cost` tokens if there are enough; false means drop the line. */
  tryTake(cost: number, nowMs: number): boolean {
    if (TokenBucket.isUnlimited(this.#limit)) return true;
    const elapsed = Math.max(0, nowMs - this.#updatedAtMs);
    this.#updatedAtMs = nowMs;
    this.#tokens = Math.min(
      this.#limit.burst,
      this.#tokens + (elapsed * this.#limit.ratePerSecond) / 1000,
    );
    if (cost > this.#tokens) return false;
    this.#tokens -= cost;
    return true;
  }
}
