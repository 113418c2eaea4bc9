import type { ChannelCredentials } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../../shared/clock.js';
import { getErrorMessage } from '../../shared/errors.js';
import type { Service } from '../../shared/lifecycle/service.js';
import { Backoff } from './backoff.js';
import { AttemptLedger } from './delivery.js';
import {
  createAgentClient,
  type AgentClient,
  createCredentials,
  DialError,
  waitForReady,
  type DialOptions,
} from './dial.js';
import { explainDialFailure } from './dial-diagnosis.js';
import { GatewayFatalError } from './errors.js';
import type { AgentIdentity } from './handshake.js';
import { notSupportedQueryHandler, Session, type SessionEnd } from './session.js';
import type { StreamSettings } from './settings.js';
import type { GatewayStreamDeps, StreamCounters } from './types.js';

/** Everything the stream needs to know; mirrors the gateway.* and buffer.* config keys. */
export interface GatewayStreamOptions extends DialOptions {
  readonly identity: AgentIdentity;
  readonly handshakeTimeoutMs: number;
  readonly reconnectInitialDelayMs: number;
  readonly reconnectMaxDelayMs: number;
  /** Initial values; the gateway may patch them at any time. */
  readonly heartbeatIntervalMs?: number;
  readonly batchSize?: number;
  readonly flushIntervalMs?: number;
  /** No Ack within this time: the item is sent again (charged one attempt). */
  readonly redeliveryTimeoutMs?: number;
  /** Failed deliveries after which an item is dropped (counted). */
  readonly maxAttempts?: number;
  /** A session that lasted this long resets the backoff. */
  readonly healthySessionMs?: number;
  readonly shutdownGraceMs?: number;
  /**
   * Items awaiting an Ack (or writes awaiting HTTP/2) with no progress for this long end the
   * session, which is then treated as failed (backoff, no reset) and its items requeued.
   */
  readonly stallTimeoutMs?: number;
  /** Buffer capacity in bytes (memory + disk): heartbeats say "overloaded" at 80 %. */
  readonly bufferCapacityBytes?: number;
}

export const DEFAULT_HEARTBEAT_INTERVAL_MS = 30_000;
export const DEFAULT_BATCH_SIZE = 100;
export const DEFAULT_FLUSH_INTERVAL_MS = 1000;
export const DEFAULT_REDELIVERY_TIMEOUT_MS = 60_000;
export const DEFAULT_MAX_ATTEMPTS = 6;
export const DEFAULT_HEALTHY_SESSION_MS = 30_000;
export const DEFAULT_SHUTDOWN_GRACE_MS = 5000;
/**
 * 30 s: a gateway acks within seconds, so half a minute without one for anything in flight
 * means the session is dead; shorter than the 60 s redelivery timeout, so a dead session ends
 * (uncharged) before its items are charged an attempt each.
 */
export const DEFAULT_STALL_TIMEOUT_MS = 30_000;
/** From this many consecutive failures on, each one is logged as an error, not a warning. */
const LOUD_FAILURE_COUNT = 10;
const OVERLOADED_RATIO = 0.8;

export type StreamState = 'idle' | 'connecting' | 'handshaking' | 'ready' | 'backoff' | 'stopped';

export interface StreamStatus {
  readonly state: StreamState;
  readonly sessionId: string | undefined;
  readonly deliveryAcks: boolean;
  /** Clock time the current session became ready; undefined when not ready. */
  readonly readySince: number | undefined;
  readonly consecutiveFailures: number;
  readonly counters: Readonly<StreamCounters>;
  /**
   * Clock time since which the stream has not been ready (since start, or since the last ready
   * session ended); undefined while ready or before start. Readiness checks apply a grace to it.
   */
  readonly notReadySince: number | undefined;
  /** Clock time the last heartbeat was written; undefined before the first. */
  readonly lastHeartbeatAt: number | undefined;
  /**
   * While ready: how long the session has waited for the gateway without progress (acks, or
   * writes taken by HTTP/2), 0 when it waits for nothing. The session ends at `stallTimeoutMs`.
   */
  readonly stalledForMs: number;
  readonly stallTimeoutMs: number;
}

/**
 * The outbound AgentService/Connect stream: dials, handshakes, drains the buffer, and
 * reconnects with backoff until closed. A failure no retry can fix rejects `done` with a
 * GatewayFatalError (main.ts exits non-zero with its message).
 */
export class GatewayStream implements Service, AsyncDisposable {
  readonly name = 'gateway-stream';
  /** Settles when the stream stops: resolves on close, rejects with a GatewayFatalError. */
  readonly done: Promise<void>;

  readonly #options: GatewayStreamOptions;
  readonly #deps: GatewayStreamDeps;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #backoff: Backoff;
  readonly #ledger = new AttemptLedger();
  readonly #settings: StreamSettings;
  readonly #counters: StreamCounters = {
    sent: 0,
    settled: 0,
    redelivered: 0,
    droppedAttempts: 0,
    reconnects: 0,
    stalls: 0,
    heartbeats: 0,
    received: 0,
  };
  readonly #controller = new AbortController();
  #state: StreamState = 'idle';
  #sessionId: string | undefined;
  #deliveryAcks = false;
  #readySince: number | undefined;
  #notReadySince: number | undefined;
  #lastHeartbeatAt: number | undefined;
  #session: Session | undefined;
  #run: Promise<void> | undefined;
  #closed: Promise<void> | undefined;
  #resolveDone!: () => void;
  #rejectDone!: (err: unknown) => void;

  constructor(options: GatewayStreamOptions, deps: GatewayStreamDeps) {
    this.#options = options;
    this.#deps = deps;
    this.#logger = deps.logger.child({ component: 'gateway-stream' });
    this.#clock = deps.clock ?? systemClock;
    this.#backoff = new Backoff(
      { initialDelayMs: options.reconnectInitialDelayMs, maxDelayMs: options.reconnectMaxDelayMs },
      deps.random,
    );
    this.#settings = {
      heartbeatIntervalMs: options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS,
      batchSize: options.batchSize ?? DEFAULT_BATCH_SIZE,
      flushIntervalMs: options.flushIntervalMs ?? DEFAULT_FLUSH_INTERVAL_MS,
    };
    this.done = new Promise<void>((resolve, reject) => {
      this.#resolveDone = resolve;
      this.#rejectDone = reject;
    });
    // Callers that never await `done` must not turn a fatal stop into an unhandled rejection.
    this.done.catch(() => undefined);
  }

  /** Returns at once: the buffer absorbs data while the stream connects in the background. */
  start(signal: AbortSignal): Promise<void> {
    if (this.#run) return Promise.resolve();
    this.#notReadySince = this.#clock.now();
    if (signal.aborted) this.#controller.abort();
    else signal.addEventListener('abort', () => void this.close(), { once: true });
    this.#run = this.#loop().then(
      () => {
        this.#setState('stopped');
        this.#resolveDone();
      },
      (err: unknown) => {
        this.#setState('stopped');
        this.#logger.fatal({ err }, 'gateway stream stopped');
        this.#rejectDone(err);
      },
    );
    return Promise.resolve();
  }

  /** Stops the stream; in-flight items go back to the buffer. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#controller.abort();
      await this.#run;
      this.#setState('stopped');
    })();
    return this.#closed;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** The live settings (a copy): the initial values as patched by the gateway. */
  get settings(): Readonly<StreamSettings> {
    return { ...this.#settings };
  }

  status(): StreamStatus {
    return {
      state: this.#state,
      sessionId: this.#sessionId,
      deliveryAcks: this.#deliveryAcks,
      readySince: this.#readySince,
      consecutiveFailures: this.#backoff.attempt,
      counters: { ...this.#counters },
      notReadySince: this.#notReadySince,
      lastHeartbeatAt: this.#lastHeartbeatAt,
      stalledForMs: this.#state === 'ready' ? (this.#session?.progress().stalledForMs ?? 0) : 0,
      stallTimeoutMs: this.#stallTimeoutMs,
    };
  }

  get #stallTimeoutMs(): number {
    return this.#options.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS;
  }

  async #loop(): Promise<void> {
    const signal = this.#controller.signal;
    const creds = await createCredentials(this.#options, this.#logger);
    let first = true;
    while (!signal.aborted) {
      if (!first) this.#counters.reconnects++;
      first = false;
      const startedAt = this.#clock.now();
      const end = await this.#connectOnce(creds, signal);
      this.#sessionId = undefined;
      this.#readySince = undefined;
      if (end.kind === 'closed') return;
      if (end.kind === 'fatal') throw end.error;
      if (end.kind === 'stalled') this.#counters.stalls++;
      const lasted = this.#clock.now() - startedAt;
      const healthyMs = this.#options.healthySessionMs ?? DEFAULT_HEALTHY_SESSION_MS;
      if (wasHealthy(end) && lasted >= healthyMs) this.#backoff.reset();
      const delayMs = this.#backoff.next();
      this.#logEnd(end, delayMs);
      this.#setState('backoff');
      try {
        await this.#clock.sleep(delayMs, signal);
      } catch {
        return;
      }
    }
  }

  async #connectOnce(creds: ChannelCredentials, signal: AbortSignal): Promise<SessionEnd> {
    this.#setState('connecting');
    const client = createAgentClient(this.#options, creds);
    // Console calls get their own connection, dialled at the first console call of this session
    // made on this thread (the relay thread dials its own: only its refusals come here).
    let consoles: AgentClient | undefined;
    const consoleClient = (): AgentClient =>
      (consoles ??= createAgentClient(this.#options, creds, 'consoles'));
    try {
      await waitForReady(client, this.#options.dialTimeoutMs, signal);
      if (signal.aborted) return { kind: 'closed' };
      this.#setState('handshaking');
      this.#session = this.#newSession();
      return await this.#session.run(client, signal, consoleClient);
    } catch (err: unknown) {
      if (signal.aborted) return { kind: 'closed' };
      if (err instanceof GatewayFatalError) return { kind: 'fatal', error: err };
      if (err instanceof DialError) return await this.#dialFailed(err, signal);
      return { kind: 'lost', reason: getErrorMessage(err), accepted: false };
    } finally {
      this.#session = undefined;
      client.close();
      consoles?.close();
    }
  }

  /**
   * grpc-js says only "could not connect": a TLS probe names the setting to check. A dial that
   * timed out is not probed (a probe would wait as long again for the same silence).
   */
  async #dialFailed(err: DialError, signal: AbortSignal): Promise<SessionEnd> {
    if (err.kind === 'timeout') {
      const reason = `${err.message}: nothing answered at ${this.#options.address}; check that it is reachable from this pod (network policy, firewall, egress proxy) and its port`;
      return { kind: 'lost', reason, accepted: false };
    }
    const explanation = await explainDialFailure(
      this.#options,
      this.#options.dialTimeoutMs,
      signal,
    );
    if (signal.aborted) return { kind: 'closed' };
    const reason = explanation === undefined ? err.message : `${err.message}: ${explanation}`;
    return { kind: 'lost', reason, accepted: false };
  }

  #newSession(): Session {
    const capacity = this.#options.bufferCapacityBytes;
    const { buffer } = this.#deps;
    return new Session(
      {
        identity: this.#options.identity,
        address: this.#options.address,
        handshakeTimeoutMs: this.#options.handshakeTimeoutMs,
        redeliveryTimeoutMs: this.#options.redeliveryTimeoutMs ?? DEFAULT_REDELIVERY_TIMEOUT_MS,
        maxAttempts: this.#options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
        shutdownGraceMs: this.#options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS,
        stallTimeoutMs: this.#stallTimeoutMs,
      },
      {
        logger: this.#logger,
        clock: this.#clock,
        buffer,
        settings: this.#settings,
        counters: this.#counters,
        ledger: this.#ledger,
        isOverloaded: () => {
          if (capacity === undefined) return false;
          const { memory, disk } = buffer.stats();
          return memory.bytes + disk.bytes >= OVERLOADED_RATIO * capacity;
        },
        sourceCounters: this.#deps.sourceCounters,
        quarantinedItems: this.#deps.quarantinedItems,
        metricsApi: this.#deps.metricsApi,
        onConfigUpdate: this.#deps.onConfigUpdate,
        onHandshake: this.#deps.onHandshake,
        queryHandler: this.#deps.queryHandler ?? notSupportedQueryHandler,
        consoleHandler: this.#deps.consoleHandler,
        nodeJobHandler: this.#deps.nodeJobHandler,
        onReady: ({ sessionId, deliveryAcks }) => {
          this.#sessionId = sessionId;
          this.#deliveryAcks = deliveryAcks;
          this.#readySince = this.#clock.now();
          this.#setState('ready');
          this.#logger.info({ sessionId, deliveryAcks }, 'gateway stream connected');
        },
        onHeartbeat: () => {
          this.#lastHeartbeatAt = this.#clock.now();
        },
      },
    );
  }

  #logEnd(end: Exclude<SessionEnd, { kind: 'closed' | 'fatal' }>, delayMs: number): void {
    const attempt = this.#backoff.attempt;
    const facts = { kind: end.kind, reason: end.reason, attempt, delayMs };
    if (attempt >= LOUD_FAILURE_COUNT) {
      this.#logger.error(facts, 'gateway unreachable: consecutive failures');
    } else if (end.kind === 'rejected') {
      this.#logger.warn(facts, 'gateway rejected the handshake; retrying');
    } else if (end.kind === 'shutdown') {
      this.#logger.warn(facts, 'gateway stream shut down by the gateway; reconnecting');
    } else if (end.kind === 'stalled') {
      this.#logger.warn(facts, 'gateway stream stalled; reconnecting');
    } else {
      this.#logger.warn(facts, 'gateway stream lost; reconnecting');
    }
  }

  #setState(state: StreamState): void {
    if (state === 'ready') this.#notReadySince = undefined;
    else if (this.#state === 'ready') this.#notReadySince = this.#clock.now();
    this.#state = state;
  }
}

/**
 * Whether a session may reset the backoff (if it also lasted long enough): only one the gateway
 * accepted and that did not die of a stall. A rejected handshake, a session that never got an
 * answer, and a stalled one are failures however long they took.
 */
function wasHealthy(end: Exclude<SessionEnd, { kind: 'closed' | 'fatal' }>): boolean {
  switch (end.kind) {
    case 'shutdown':
      return true;
    case 'lost':
      return end.accepted;
    case 'rejected':
    case 'stalled':
      return false;
  }
}
