import type { Logger } from 'pino';
import type { GatewayBuffer } from './types.js';

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

  /** The id sent longest ago and still unsettled: the item a lost session ended on. */
  oldest(): string | undefined {
    for (const id of this.#sentAt.keys()) return id;
    return undefined;
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

/** Lost sessions that may end on the same item before it is set aside (quarantined). */
export const SESSION_ENDS_BEFORE_QUARANTINE = 3;

/**
 * Whether a call's end status says the gateway could not decode what it was sent: grpc-js
 * servers end the call with INTERNAL "Error deserializing request"; other servers word it as
 * a decode, unmarshal or parse failure.
 */
export function isUndecodableRejection(reason: string): boolean {
  return /^INTERNAL: .*(deserializ|decod|unmarshal|pars)/i.test(reason);
}

/**
 * Whether a call's end status could have been caused by what the session sent: the gateway
 * refused or failed on a message (INTERNAL, INVALID_ARGUMENT, ...). A transport loss
 * (UNAVAILABLE, CANCELLED, DEADLINE_EXCEEDED, a gateway that restarts or ends the stream
 * cleanly) says nothing about the item in flight, so it must never cost that item an attempt:
 * a gateway in a crash loop would otherwise quarantine whatever sat at the head of the queue.
 */
export function isItemFault(reason: string): boolean {
  return ITEM_FAULT_STATUS.test(reason);
}

const ITEM_FAULT_STATUS =
  /^(INTERNAL|UNKNOWN|INVALID_ARGUMENT|RESOURCE_EXHAUSTED|FAILED_PRECONDITION|OUT_OF_RANGE|DATA_LOSS|UNIMPLEMENTED):/;

/** What to do with the item a lost session ended on. */
export type SessionEndVerdict =
  | { readonly kind: 'suspect' }
  | { readonly kind: 'charged'; readonly sessionEnds: number }
  | { readonly kind: 'quarantine'; readonly why: string };

/**
 * Failed deliveries per item, kept across sessions: a redelivery timeout or a failed write
 * charges the items concerned; a lost session charges the one item it ended on (the oldest
 * unacked), so an item that kills every session cannot stay at the front forever.
 *
 * Which item killed a session is a guess when many were in flight (a gateway that batches
 * acks may not have acked the good ones before it). So the item a session ended on becomes a
 * suspect: the next session sends it alone and waits for its ack before sending more. A
 * session that then ends with the suspect alone in flight, refused as undecodable, has named
 * its culprit: the item is quarantined. Any item that ends SESSION_ENDS_BEFORE_QUARANTINE
 * sessions is quarantined too. Only ends that the item could have caused count (isItemFault):
 * a gateway that merely restarts or drops the connection costs the head one round trip alone,
 * never an attempt.
 */
export class AttemptLedger {
  readonly #charges = new Map<string, number>();
  readonly #sessionEnds = new Map<string, number>();
  readonly #suspects = new Set<string>();

  charge(ids: Iterable<string>): void {
    for (const id of ids) this.#charges.set(id, (this.#charges.get(id) ?? 0) + 1);
  }

  charges(id: string): number {
    return this.#charges.get(id) ?? 0;
  }

  /** A lost session ended with `id` the oldest item in flight (`alone`: the only one). */
  sessionEnded(id: string, facts: { alone: boolean; reason: string }): SessionEndVerdict {
    this.#suspects.add(id);
    // A transport loss is nobody's fault: sent alone next time, but never charged.
    if (!isItemFault(facts.reason)) return { kind: 'suspect' };
    this.charge([id]);
    const sessionEnds = (this.#sessionEnds.get(id) ?? 0) + 1;
    this.#sessionEnds.set(id, sessionEnds);
    // Alone in flight, nothing else can have been the message the gateway could not decode.
    if (facts.alone && isUndecodableRejection(facts.reason)) {
      return { kind: 'quarantine', why: `the gateway could not decode it (${facts.reason})` };
    }
    if (sessionEnds >= SESSION_ENDS_BEFORE_QUARANTINE) {
      return { kind: 'quarantine', why: `${String(sessionEnds)} sessions ended on it` };
    }
    return { kind: 'charged', sessionEnds };
  }

  /** Whether the next session must send this item alone (a session ended on it). */
  isSuspect(id: string): boolean {
    return this.#suspects.has(id);
  }

  forget(ids: Iterable<string>): void {
    for (const id of ids) {
      this.#charges.delete(id);
      this.#sessionEnds.delete(id);
      this.#suspects.delete(id);
    }
  }

  get size(): number {
    return this.#charges.size;
  }
}

/** What chargeSessionEnd needs from the session. */
interface SessionEndContext {
  readonly ledger: AttemptLedger;
  readonly buffer: Pick<GatewayBuffer, 'quarantine'>;
  readonly logger: Logger;
}

/**
 * Called as a session tears down, before its in-flight items go back to the buffer: a lost
 * session charges the oldest item still unacked, and quarantines it when the ledger says so.
 * Shutdowns and closes charge nothing.
 */
export function chargeSessionEnd(
  end: { readonly kind: string; readonly reason?: string } | undefined,
  window: InflightWindow,
  ctx: SessionEndContext,
): void {
  const head = window.oldest();
  if (end?.kind !== 'lost' || head === undefined) return;
  const reason = end.reason ?? '';
  const verdict = ctx.ledger.sessionEnded(head, { alone: window.size === 1, reason });
  if (verdict.kind === 'suspect') {
    ctx.logger.debug(
      { id: head, reason },
      'session lost in transport: the oldest unacked item goes alone next time, uncharged',
    );
    return;
  }
  if (verdict.kind === 'charged') {
    ctx.logger.info(
      { id: head, sessionEnds: verdict.sessionEnds, reason },
      'session ended with this item the oldest unacked: charged, sent alone next time',
    );
    return;
  }
  window.remove([head]);
  ctx.buffer.quarantine([head], 'rejected');
  ctx.ledger.forget([head]);
  ctx.logger.error({ id: head, reason }, `item quarantined: ${verdict.why}`);
}

export function toError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(String(reason));
}
