/**
 * How long a session has waited for the gateway without progress. Two things can wait: items
 * sent and not yet acknowledged (delivery_acks sessions), and writes not yet taken by HTTP/2
 * (a gateway that stops reading fills the flow-control window and every write waits). An open
 * call with work outstanding and no progress for the stall timeout is a dead session, whatever
 * the transport says: a gateway that ended the call without the agent noticing, a proxy that
 * froze, a server that stopped calling read while its HTTP/2 layer still answers pings.
 */
export class ProgressWatch {
  #outstanding = 0;
  /** Clock time of the last progress, or of the moment work started to be outstanding. */
  #since = 0;

  get outstanding(): number {
    return this.#outstanding;
  }

  /** `count` more things to wait for; the wait starts now if nothing was outstanding. */
  add(count: number, now: number): void {
    if (count <= 0) return;
    if (this.#outstanding === 0) this.#since = now;
    this.#outstanding += count;
  }

  /** `count` things done: progress, so the wait for the rest starts again now. */
  settle(count: number, now: number): void {
    if (count <= 0) return;
    this.#outstanding = Math.max(0, this.#outstanding - count);
    this.#since = now;
  }

  /** `count` things given up without progress (returned for redelivery): the wait goes on. */
  drop(count: number): void {
    this.#outstanding = Math.max(0, this.#outstanding - count);
  }

  /** Milliseconds outstanding work has waited without progress; 0 when nothing waits. */
  waitingFor(now: number): number {
    return this.#outstanding === 0 ? 0 : Math.max(0, now - this.#since);
  }
}
