// Bounds the live queries one agent runs against the API server: `running` at once and
// `waiting` queued behind them; one more is refused at once (RESOURCE_EXHAUSTED) rather than
// queued without end, so a burst from the platform cannot pile work onto the API server.

export type Release = () => void;

export class QueryGate {
  readonly #maxRunning: number;
  readonly #maxWaiting: number;
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(maxRunning: number, maxWaiting: number) {
    this.#maxRunning = maxRunning;
    this.#maxWaiting = maxWaiting;
  }

  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  /**
   * A slot, now or once one frees; undefined (at once) when every slot and every waiting place
   * is taken. A wait ended by `signal` rejects with the signal's reason and gives its place up.
   */
  enter(signal: AbortSignal): Promise<Release> | undefined {
    if (this.#running < this.#maxRunning) {
      this.#running++;
      return Promise.resolve(this.#releaser());
    }
    if (this.#waiting.length >= this.#maxWaiting) return undefined;
    return new Promise<Release>((resolve, reject) => {
      const wake = (): void => {
        signal.removeEventListener('abort', onAbort);
        this.#running++;
        resolve(this.#releaser());
      };
      const onAbort = (): void => {
        const index = this.#waiting.indexOf(wake);
        if (index >= 0) this.#waiting.splice(index, 1);
        reject(signal.reason as Error);
      };
      if (signal.aborted) {
        reject(signal.reason as Error);
        return;
      }
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(wake);
    });
  }

  #releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#running--;
      this.#waiting.shift()?.();
    };
  }
}
