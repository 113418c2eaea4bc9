// How much of one event-loop turn the log readers may spend on chunks before they yield.
//
// Why: libuv reads up to 32 x 64 KiB from a ready socket in one go, and a follow stream from a
// busy container has that much waiting whenever the previous turn was long. Handled in the same
// turn, four such streams took about a second of CPU per turn at 60,000 lines/s, and everything
// else the collector does waited for the next turn: the gateway stream above all. Its HTTP/2
// stream sends at most one flow-control window (64 KiB at a gateway that keeps the default) per
// WINDOW_UPDATE it reads, and it reads one per turn: with one-second turns the gateway got one
// message a second while the buffer filled (the pod-logs e2e bench shipped 83 of 60,000 lines/s).
//
// So chunks are handed over through one queue per collector: while the turn has budget left and
// nothing waits, a chunk is handled at once; otherwise it waits in the queue and its stream is
// paused (Node then stops reading that socket; TCP holds the rest at the API server). The queue
// is worked off in the check phase of the following turns, `budgetMs` at a time, oldest chunk
// first, and a stream resumes once none of its chunks wait. Between two turns the poll phase
// serves every other socket: the gateway's acks and window updates, health probes, timers.
import { performance } from 'node:perf_hooks';

/** What a reader hands over to be paused and resumed: an http.IncomingMessage. */
export interface PausableStream {
  pause(): unknown;
  resume(): unknown;
  readonly destroyed: boolean;
}

/** 10 ms: about one 64 KiB chunk of short lines; most of every turn stays free for the rest. */
export const DEFAULT_TURN_BUDGET_MS = 10;

interface Waiting {
  readonly stream: PausableStream;
  readonly chunk: Buffer;
  readonly handle: (chunk: Buffer) => void;
}

export class TurnBudget {
  readonly #budgetMs: number;
  readonly #now: () => number;
  /** When the current turn's first chunk started; undefined between turns. */
  #turnStartedAt: number | undefined;
  #scheduled = false;
  readonly #queue: Waiting[] = [];
  readonly #paused = new Set<PausableStream>();
  /** Callers waiting until a stream has no chunk left in the queue. */
  readonly #settledWaiters = new Map<PausableStream, (() => void)[]>();

  constructor(budgetMs = DEFAULT_TURN_BUDGET_MS, now: () => number = () => performance.now()) {
    this.#budgetMs = budgetMs;
    this.#now = now;
  }

  /** Chunks waiting for a later turn (their streams are paused). */
  get waiting(): number {
    return this.#queue.length;
  }

  /**
   * Hands `chunk` of `stream` to `handle`: now, or in a later turn when this one's budget is
   * spent or older chunks wait. Chunks of one stream are always handled in order.
   */
  offer(stream: PausableStream, chunk: Buffer, handle: (chunk: Buffer) => void): void {
    const now = this.#now();
    if (this.#turnStartedAt === undefined) {
      this.#turnStartedAt = now;
      this.#schedule();
    }
    if (this.#queue.length === 0 && now - this.#turnStartedAt < this.#budgetMs) {
      handle(chunk);
      return;
    }
    this.#queue.push({ stream, chunk, handle });
    if (!this.#paused.has(stream)) {
      this.#paused.add(stream);
      stream.pause();
    }
  }

  /**
   * Resolves once no chunk of `stream` waits: a read that ended (its socket closed) is over only
   * when its last chunks have been handed over.
   */
  settled(stream: PausableStream): Promise<void> {
    if (!this.#queue.some((w) => w.stream === stream)) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const waiters = this.#settledWaiters.get(stream) ?? [];
      waiters.push(resolve);
      this.#settledWaiters.set(stream, waiters);
    });
  }

  /** Drops the waiting chunks of `stream` (its read was aborted: nothing more is handed over). */
  forget(stream: PausableStream): void {
    const kept = this.#queue.filter((w) => w.stream !== stream);
    this.#queue.splice(0, this.#queue.length, ...kept);
    this.#paused.delete(stream);
    this.#wakeSettled(stream);
  }

  #wakeSettled(stream: PausableStream): void {
    const waiters = this.#settledWaiters.get(stream);
    if (waiters === undefined) return;
    this.#settledWaiters.delete(stream);
    for (const wake of waiters) wake();
  }

  /**
   * Queued now (in the poll phase, or from a nextTick), an immediate runs in this turn's check
   * phase; queued from the check phase, it runs a turn later, after a poll phase.
   */
  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#work();
    });
  }

  #work(): void {
    this.#turnStartedAt = this.#now();
    while (this.#queue.length > 0 && this.#now() - this.#turnStartedAt < this.#budgetMs) {
      // A closed stream's chunks were still read from it: handed over all the same.
      const next = this.#queue.shift();
      next?.handle(next.chunk);
    }
    const stillWaiting = new Set(this.#queue.map((w) => w.stream));
    for (const stream of [...this.#paused]) {
      if (stillWaiting.has(stream)) continue;
      this.#paused.delete(stream);
      if (!stream.destroyed) stream.resume();
      this.#wakeSettled(stream);
    }
    // Chunks of resumed streams arrive in this check phase and start a turn of their own.
    this.#turnStartedAt = undefined;
    if (this.#queue.length > 0) {
      this.#turnStartedAt = this.#now();
      this.#schedule();
    }
  }
}
