// At most `maxConcurrent` streams at once, served round-robin: while containers wait, a stream
// that has held its slot for `sliceMs` is asked to yield and goes to the back of the queue, so
// every eligible container is eventually collected even with more containers than slots.
import type { Clock } from '../../../shared/clock.js';

/** What a session asks for next: requeue now, retry after backoff, or stop until wanted again. */
export type SessionOutcome = 'again' | 'retry' | 'done';

export interface SchedulerOptions {
  readonly maxConcurrent: number;
  readonly sliceMs: number;
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
}

export type RunSession = (key: string, signal: AbortSignal) => Promise<SessionOutcome>;

interface Running {
  readonly controller: AbortController;
  readonly startedAtMs: number;
}

export class StreamScheduler {
  readonly #options: SchedulerOptions;
  readonly #clock: Clock;
  readonly #run: RunSession;
  readonly #signal: AbortSignal;
  readonly #queuedHook: (() => void) | undefined;
  readonly #wanted = new Set<string>();
  readonly #queue: string[] = [];
  readonly #queued = new Set<string>();
  readonly #running = new Map<string, Running>();
  readonly #backoff = new Map<string, number>();
  readonly #waiting = new Set<string>();
  #maxActive = 0;

  constructor(
    options: SchedulerOptions,
    deps: {
      clock: Clock;
      run: RunSession;
      signal: AbortSignal;
      /** A container was left waiting for a slot: rebalance() has work until none waits. */
      queued?: () => void;
    },
  ) {
    this.#options = options;
    this.#clock = deps.clock;
    this.#run = deps.run;
    this.#signal = deps.signal;
    this.#queuedHook = deps.queued;
  }

  want(key: string): void {
    if (this.#wanted.has(key)) return;
    this.#wanted.add(key);
    this.#enqueue(key);
  }

  unwant(key: string): void {
    this.#wanted.delete(key);
    this.#running.get(key)?.controller.abort();
  }

  wanted(): ReadonlySet<string> {
    return this.#wanted;
  }

  /** Preempts streams past their slice while others wait; call periodically. */
  rebalance(): void {
    let waiting = this.#queue.length;
    const now = this.#clock.now();
    for (const running of this.#running.values()) {
      if (waiting <= 0) return;
      if (now - running.startedAtMs >= this.#options.sliceMs) {
        running.controller.abort();
        waiting--;
      }
    }
  }

  stats(): { active: number; queued: number; maxActive: number } {
    return { active: this.#running.size, queued: this.#queue.length, maxActive: this.#maxActive };
  }

  #enqueue(key: string): void {
    if (this.#queued.has(key) || this.#running.has(key) || this.#waiting.has(key)) return;
    if (!this.#wanted.has(key)) return;
    this.#queue.push(key);
    this.#queued.add(key);
    this.#pump();
    if (this.#queue.length > 0) this.#queuedHook?.();
  }

  #pump(): void {
    while (
      !this.#signal.aborted &&
      this.#running.size < this.#options.maxConcurrent &&
      this.#queue.length > 0
    ) {
      const key = this.#queue.shift();
      if (key === undefined) return;
      this.#queued.delete(key);
      if (!this.#wanted.has(key)) continue;
      this.#start(key);
    }
  }

  #start(key: string): void {
    const controller = new AbortController();
    const signal = AbortSignal.any([this.#signal, controller.signal]);
    this.#running.set(key, { controller, startedAtMs: this.#clock.now() });
    this.#maxActive = Math.max(this.#maxActive, this.#running.size);
    void this.#run(key, signal)
      .catch((): SessionOutcome => 'retry')
      .then((outcome) => {
        this.#running.delete(key);
        this.#after(key, outcome);
        this.#pump();
      });
  }

  #after(key: string, outcome: SessionOutcome): void {
    if (this.#signal.aborted || !this.#wanted.has(key)) return;
    if (outcome === 'done') {
      this.#wanted.delete(key);
      return;
    }
    if (outcome === 'again') {
      this.#backoff.delete(key);
      this.#enqueue(key);
      return;
    }
    const delay = this.#backoff.get(key) ?? this.#options.initialBackoffMs;
    this.#backoff.set(key, Math.min(this.#options.maxBackoffMs, delay * 2));
    this.#waiting.add(key);
    void this.#clock
      .sleep(delay * (0.8 + 0.4 * Math.random()), this.#signal)
      .catch(() => undefined)
      .then(() => {
        this.#waiting.delete(key);
        this.#enqueue(key);
      });
  }
}
