/**
 * Items sent and awaiting the gateway's Ack (delivery_acks sessions only), with the time each
 * was sent, so the window can be bounded and late items redelivered.
 */
export class InflightWindow {
  readonly #sentAt = new Map<string, number>();
  #waiters: (() => void)[] = [];

  get size(): number {
    return this.#sentAt.size;
  }

  add(id: string, now: number): void {
    this.#sentAt.set(id, now);
  }

  /** Removes the ids present; returns those, in the order given. */
  remove(ids: Iterable<string>): string[] {
    const removed: string[] = [];
    for (const id of ids) {
      if (this.#sentAt.delete(id)) removed.push(id);
    }
    if (removed.length > 0) this.#wake();
    return removed;
  }

  /** Ids sent at least `timeoutMs` ago, oldest first. */
  expired(now: number, timeoutMs: number): string[] {
    const out: string[] = [];
    for (const [id, sentAt] of this.#sentAt) {
      if (now - sentAt >= timeoutMs) out.push(id);
    }
    return out;
  }

  clear(): void {
    this.#sentAt.clear();
    this.#wake();
  }

  /** Resolves once at most `limit` items are in flight; rejects when `signal` aborts. */
  async waitForRoom(limit: number, signal: AbortSignal): Promise<void> {
    while (this.#sentAt.size > limit) {
      await this.#nextChange(signal);
    }
  }

  /** Resolves when nothing is in flight. */
  async waitUntilEmpty(signal: AbortSignal): Promise<void> {
    await this.waitForRoom(0, signal);
  }

  #nextChange(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(toError(signal.reason));
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#waiters = this.#waiters.filter((w) => w !== wake);
        reject(toError(signal.reason));
      };
      const wake = (): void => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(wake);
    });
  }

  #wake(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}

/**
 * Failed deliveries per item (a redelivery timeout or a failed write), kept across sessions.
 * A session lost with items in flight charges nothing: the gateway may simply have restarted.
 */
export class AttemptLedger {
  readonly #charges = new Map<string, number>();

  charge(ids: Iterable<string>): void {
    for (const id of ids) this.#charges.set(id, (this.#charges.get(id) ?? 0) + 1);
  }

  charges(id: string): number {
    return this.#charges.get(id) ?? 0;
  }

  forget(ids: Iterable<string>): void {
    for (const id of ids) this.#charges.delete(id);
  }

  get size(): number {
    return this.#charges.size;
  }
}

export function toError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(String(reason));
}
