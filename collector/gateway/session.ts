import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  type AgentHealth,
  AgentMessage,
  type ConfigUpdate,
  type GatewayMessage,
  type HandshakeResponse,
  QueryErrorCode,
  type ResourceQuery,
  type ResourceQueryResult,
} from '../../proto/index.js';
import type { Clock } from '../../shared/clock.js';
import { getErrorMessage } from '../../shared/errors.js';
import { chargeSessionEnd, type AttemptLedger, InflightWindow, toError } from './delivery.js';
import type { AgentClient, ConnectCall, ConsoleCall } from './dial.js';
import { GatewayFatalError } from './errors.js';
import { ProgressWatch } from './liveness.js';
import {
  buildHandshake,
  evaluateHandshake,
  handshakeHeaders,
  type AgentIdentity,
} from './handshake.js';
import { applySettingsPatch, SETTINGS_BOUNDS, type StreamSettings } from './settings.js';
import type {
  GatewayBuffer,
  MetricsApiState,
  QueryHandler,
  SourceCounters,
  StreamCounters,
} from './types.js';
import { Wakeup } from './wakeup.js';

/** How a session ended; the stream's reconnect policy branches on it. */
export type SessionEnd =
  | { readonly kind: 'lost'; readonly reason: string; readonly accepted: boolean }
  | { readonly kind: 'rejected'; readonly reason: string }
  | { readonly kind: 'shutdown'; readonly reason: string }
  /** Accepted, then no progress (acks, or writes taken by HTTP/2) for the stall timeout. */
  | { readonly kind: 'stalled'; readonly reason: string }
  | { readonly kind: 'fatal'; readonly error: GatewayFatalError }
  | { readonly kind: 'closed' };

export interface SessionOptions {
  readonly identity: AgentIdentity;
  readonly address: string;
  readonly handshakeTimeoutMs: number;
  readonly redeliveryTimeoutMs: number;
  readonly maxAttempts: number;
  /** How long a Shutdown waits for outstanding acks before half-closing. */
  readonly shutdownGraceMs: number;
  /**
   * Work outstanding (items awaiting an Ack, writes awaiting HTTP/2) with no progress for this
   * long ends the session: the call may look open, but the gateway is not there.
   */
  readonly stallTimeoutMs: number;
}

/** What the session is waiting for, for readiness and status. */
export interface SessionProgress {
  /** Items sent and awaiting the gateway's Ack (delivery_acks sessions). */
  readonly awaitingAck: number;
  /** Writes handed to the call and not yet taken by HTTP/2. */
  readonly awaitingWrite: number;
  /** The longer of the two waits without progress, in ms; 0 when nothing waits. */
  readonly stalledForMs: number;
}

/** The heartbeat's log-source counts without a log source. */
const NO_SOURCE_COUNTS: SourceCounters = {
  truncatedLines: 0,
  droppedTooOld: 0,
  droppedFuture: 0,
  droppedRateLimited: 0,
};

export interface SessionContext {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly buffer: GatewayBuffer;
  readonly settings: StreamSettings;
  readonly counters: StreamCounters;
  readonly ledger: AttemptLedger;
  readonly isOverloaded: () => boolean;
  readonly sourceCounters: (() => SourceCounters) | undefined;
  readonly quarantinedItems: (() => number) | undefined;
  readonly metricsApi: (() => MetricsApiState) | undefined;
  readonly onConfigUpdate: ((update: ConfigUpdate) => void) | undefined;
  /** Each accepted handshake's opt-ins, before its config snapshot is applied. */
  readonly onHandshake: ((accepted: { acceptedPayloads: readonly string[] }) => void) | undefined;
  readonly queryHandler: QueryHandler;
  /** Called once the handshake is accepted. */
  readonly onReady: (info: { sessionId: string; deliveryAcks: boolean }) => void;
  /** Called after each heartbeat is written. */
  readonly onHeartbeat?: () => void;
  /** Console requests (console_open, console_attach); absent: the agent does not do consoles. */
  readonly consoleHandler?: ConsoleHandler | undefined;
  /** Node jobs and mutations (node_job_request, node_job_cancel, mutation_request). */
  readonly nodeJobHandler?: NodeJobHandler | undefined;
}

/**
 * A console request from the gateway, and how to dial that console's own call: `dial` on this
 * thread, or, from another thread (the console relay's, console-relay-thread.ts), a call of its
 * own to the same gateway carrying `headers`.
 */
export type ConsoleHandler = (
  request: Extract<
    NonNullable<GatewayMessage['payload']>,
    { $case: 'consoleOpen' } | { $case: 'consoleAttach' }
  >,
  dial: () => ConsoleCall,
  headers: Readonly<Record<string, string>>,
) => void;

export type ConsoleRequestPayload = Extract<
  NonNullable<GatewayMessage['payload']>,
  { $case: 'consoleOpen' } | { $case: 'consoleAttach' }
>;

function isConsoleRequest(
  payload: NonNullable<GatewayMessage['payload']>,
): payload is ConsoleRequestPayload {
  return payload.$case === 'consoleOpen' || payload.$case === 'consoleAttach';
}

export type NodeJobRequestPayload = Extract<
  NonNullable<GatewayMessage['payload']>,
  { $case: 'nodeJobRequest' | 'nodeJobCancel' | 'mutationRequest' }
>;

/** What answers a node job or mutation request on the session that asked. */
export type NodeJobAnswer = Extract<
  NonNullable<AgentMessage['payload']>,
  { $case: 'nodeJobEvent' | 'mutationResult' }
>;

/**
 * A node job or mutation request, and how to answer it: `answer` writes on the asking session's
 * own call (never buffered) and returns false once that session has ended.
 */
export type NodeJobHandler = (
  request: NodeJobRequestPayload,
  answer: (payload: NodeJobAnswer) => boolean,
) => void;

const PRIVILEGED_CASES: ReadonlySet<string> = new Set([
  'consoleOpen',
  'consoleAttach',
  'nodeJobRequest',
  'nodeJobCancel',
  'mutationRequest',
]);

/** Requests for the executor: consoles, node jobs and mutations. */
function isPrivilegedRequest(
  payload: NonNullable<GatewayMessage['payload']>,
): payload is ConsoleRequestPayload | NodeJobRequestPayload {
  return PRIVILEGED_CASES.has(payload.$case);
}

/** A throttle with no delay still has to slow something: 1 s per drain round. */
const DEFAULT_THROTTLE_DELAY_MS = 1000;

/** The answer to every live query until the query component exists. */
export const notSupportedQueryHandler: QueryHandler = (query) =>
  Promise.resolve({
    queryId: query.queryId,
    // POLICY_DENIED, not INTERNAL: it is final for this agent version, so a retry cannot help.
    error: {
      code: QueryErrorCode.QUERY_ERROR_POLICY_DENIED,
      message: 'live queries are not supported by this agent version yet',
    },
    payload: Buffer.alloc(0),
    continueToken: '',
    remaining: 0,
    truncated: false,
  });

/** One Connect call: handshake, then drain, heartbeats, redelivery sweep and gateway messages. */
export class Session {
  readonly #options: SessionOptions;
  readonly #ctx: SessionContext;
  readonly #window = new InflightWindow();
  readonly #acks = new ProgressWatch();
  readonly #writes = new ProgressWatch();
  readonly #controller = new AbortController();
  readonly #settingsChanged = new Wakeup();
  readonly #throttleChanged = new Wakeup();
  /** Resolves the sweep's wait for outstanding work (set only while it waits). */
  #onWorkOutstanding: (() => void) | undefined;
  #call: ConnectCall | undefined;
  #client: AgentClient | undefined;
  #consoleClient: (() => AgentClient) | undefined;
  #end: ((end: SessionEnd) => void) | undefined;
  #ended = false;
  #endedWith: SessionEnd | undefined;
  #accepted = false;
  #deliveryAcks = false;
  #throttleDelayMs = 0;
  /** Set by a Shutdown: the drain takes nothing more. */
  #draining = false;
  readonly #drainStop = new AbortController();
  #handshakeReply: ((response: HandshakeResponse) => void) | undefined;

  constructor(options: SessionOptions, ctx: SessionContext) {
    this.#options = options;
    this.#ctx = ctx;
  }

  /** What the session waits for right now. */
  progress(): SessionProgress {
    const now = this.#ctx.clock.now();
    return {
      awaitingAck: this.#acks.outstanding,
      awaitingWrite: this.#writes.outstanding,
      stalledForMs: Math.max(this.#acks.waitingFor(now), this.#writes.waitingFor(now)),
    };
  }

  /**
   * Runs the session to its end. Never throws: every outcome is a SessionEnd. Console calls are
   * dialled on `consoleClient()` (its own connection, dial.ts), else on `client`.
   */
  async run(
    client: AgentClient,
    signal: AbortSignal,
    consoleClient: () => AgentClient = () => client,
  ): Promise<SessionEnd> {
    this.#consoleClient = consoleClient;
    const ended = new Promise<SessionEnd>((resolve) => (this.#end = resolve));
    const onAbort = (): void => {
      this.#finish({ kind: 'closed' });
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      this.#open(client);
      void this.#handshake();
      const end = await ended;
      return end;
    } finally {
      signal.removeEventListener('abort', onAbort);
      this.#teardown();
    }
  }

  // ---- lifecycle ----

  #open(client: AgentClient): void {
    const metadata = new Metadata();
    for (const [key, value] of Object.entries(handshakeHeaders(this.#options.identity))) {
      metadata.set(key, value);
    }
    const call = client.connect(metadata);
    this.#call = call;
    this.#client = client;
    call.on('data', (message: GatewayMessage) => {
      this.#onMessage(message);
    });
    call.on('error', (err: ServiceError) => {
      this.#finish(this.#classifyStatus(err));
    });
    call.on('end', () => {
      this.#finish({
        kind: 'lost',
        reason: 'the gateway ended the stream',
        accepted: this.#accepted,
      });
    });
  }

  #finish(end: SessionEnd): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#endedWith = end;
    this.#controller.abort();
    this.#end?.(end);
  }

  /**
   * Returns everything in flight to the front of the buffer and drops the call. A lost session
   * first charges the item it ended on (AttemptLedger.sessionEnded), which may quarantine it.
   */
  #teardown(): void {
    this.#controller.abort();
    chargeSessionEnd(this.#endedWith, this.#window, this.#ctx);
    this.#window.clear();
    const returned = this.#ctx.buffer.requeue();
    if (returned > 0) {
      this.#ctx.logger.info({ items: returned }, 'unsettled items returned to the buffer');
    }
    const call = this.#call;
    if (call) {
      call.removeAllListeners('data');
      // A late 'error' after cancel must not become an unhandled event.
      call.on('error', () => undefined);
      call.cancel();
    }
  }

  #classifyStatus(err: ServiceError): SessionEnd {
    const details = err.details || err.message;
    if (err.code === status.UNAUTHENTICATED) {
      return {
        kind: 'fatal',
        error: new GatewayFatalError(
          'ERR_GATEWAY_UNAUTHENTICATED',
          `the gateway refused the tenant token (UNAUTHENTICATED: ${details}): set a valid token in KUBEXA_TENANT_TOKEN (chart: secret.tenantToken or secret.existingSecret) and restart`,
          { cause: err },
        ),
      };
    }
    if (err.code === status.UNIMPLEMENTED) {
      return {
        kind: 'fatal',
        error: new GatewayFatalError(
          'ERR_GATEWAY_UNIMPLEMENTED',
          `${this.#options.address} does not serve agent.v1.AgentService/Connect (UNIMPLEMENTED: ${details}): check gateway.address`,
          { cause: err },
        ),
      };
    }
    if (err.code === status.CANCELLED && this.#controller.signal.aborted) return { kind: 'closed' };
    return {
      kind: 'lost',
      reason: `${status[err.code]}: ${details}`,
      accepted: this.#accepted,
    };
  }

  // ---- handshake ----

  async #handshake(): Promise<void> {
    const signal = this.#controller.signal;
    const reply = new Promise<HandshakeResponse>((resolve) => (this.#handshakeReply = resolve));
    try {
      await this.#write(AgentMessage.encode(buildHandshake(this.#options.identity)).finish());
      // Its own controller, so the timer goes away as soon as the reply is in.
      const timer = new AbortController();
      const timeout = this.#ctx.clock
        .sleep(this.#options.handshakeTimeoutMs, AbortSignal.any([signal, timer.signal]))
        .then(() => undefined);
      const response = await Promise.race([reply, timeout]).finally(() => {
        timer.abort();
      });
      if (!response) {
        const reason = `no handshake reply within ${this.#options.handshakeTimeoutMs} ms`;
        this.#finish({ kind: 'lost', reason, accepted: false });
        return;
      }
      this.#onHandshake(response);
    } catch (err: unknown) {
      if (err instanceof GatewayFatalError) this.#finish({ kind: 'fatal', error: err });
      else this.#finish({ kind: 'lost', reason: getErrorMessage(err), accepted: this.#accepted });
    }
  }

  #onHandshake(response: HandshakeResponse): void {
    const outcome = evaluateHandshake(response);
    if (outcome.kind === 'rejected') {
      this.#finish({ kind: 'rejected', reason: outcome.reason });
      return;
    }
    this.#accepted = true;
    this.#deliveryAcks = outcome.deliveryAcks;
    this.#ctx.onHandshake?.({ acceptedPayloads: outcome.acceptedPayloads });
    this.#applyConfig(outcome.config ? { configVersion: '', config: outcome.config } : undefined);
    this.#ctx.onReady({ sessionId: outcome.sessionId, deliveryAcks: outcome.deliveryAcks });
    this.#spawn('drain', () => this.#drainLoop());
    this.#spawn('heartbeat', () => this.#heartbeatLoop());
    this.#spawn('sweep', () => this.#sweepLoop());
  }

  /** Runs a loop; its failure ends the session (abort on session end is the normal exit). */
  #spawn(name: string, loop: () => Promise<void>): void {
    loop().catch((err: unknown) => {
      // A Shutdown stops the drain on purpose; the shutdown path ends the session itself.
      if (this.#controller.signal.aborted || this.#draining) return;
      this.#finish({ kind: 'lost', reason: `${name}: ${getErrorMessage(err)}`, accepted: true });
    });
  }

  // ---- gateway -> agent ----

  #onMessage(message: GatewayMessage): void {
    this.#ctx.counters.received++;
    const payload = message.payload;
    if (!payload) return;
    if (!this.#accepted && payload.$case !== 'handshake') {
      this.#ctx.logger.warn({ kind: payload.$case }, 'gateway message before handshake ignored');
      return;
    }
    if (isPrivilegedRequest(payload)) {
      this.#onPrivileged(payload);
      return;
    }
    switch (payload.$case) {
      case 'handshake':
        this.#handshakeReply?.(payload.value);
        this.#handshakeReply = undefined;
        return;
      case 'ack':
        this.#onAck(payload.value.messageIds);
        return;
      case 'config':
        this.#applyConfig(payload.value);
        return;
      case 'backpressure':
        this.#onBackpressure(payload.value.throttle, payload.value.delayMs);
        return;
      case 'shutdown':
        void this.#onShutdown(payload.value.reason);
        return;
      case 'resourceQuery':
        void this.#answerQuery(payload.value);
        return;
    }
  }

  #onPrivileged(payload: ConsoleRequestPayload | NodeJobRequestPayload): void {
    if (isConsoleRequest(payload)) {
      this.#onConsole(payload);
      return;
    }
    const handler = this.#ctx.nodeJobHandler;
    if (handler === undefined) {
      this.#ctx.logger.warn(
        { kind: payload.$case },
        'node job or mutation request ignored: no executor relay in this process',
      );
      return;
    }
    // The handler returns at once: a job's progress arrives later, so a slow drain never holds
    // up the next gateway message.
    handler(payload, (answer) => this.#answerDirect(answer));
  }

  /**
   * Writes the answer to this session's own request straight on the call, beside the drain: it
   * waits behind no buffered item, only behind writes already handed to the call. False once the
   * session has ended: an answer never goes to another session (docs/gateway.md, "Node jobs and
   * mutations"); the durable audit record carries the outcome instead.
   */
  #answerDirect(payload: NodeJobAnswer): boolean {
    if (this.#ended || this.#call === undefined) return false;
    const message: AgentMessage = { messageId: randomUUID(), payload };
    // A write that fails has lost its session; the session's own end handling reports that.
    this.#write(AgentMessage.encode(message).finish()).catch(() => undefined);
    return true;
  }

  #onConsole(
    payload: Extract<
      NonNullable<GatewayMessage['payload']>,
      { $case: 'consoleOpen' } | { $case: 'consoleAttach' }
    >,
  ): void {
    const client = this.#client;
    const handler = this.#ctx.consoleHandler;
    if (client === undefined || handler === undefined) {
      this.#ctx.logger.warn({ kind: payload.$case }, 'console request ignored: consoles are off');
      return;
    }
    const headers = handshakeHeaders(this.#options.identity);
    handler(
      payload,
      () => {
        const metadata = new Metadata();
        for (const [key, value] of Object.entries(headers)) metadata.set(key, value);
        return (this.#consoleClient?.() ?? client).console(metadata);
      },
      headers,
    );
  }

  #onAck(ids: readonly string[]): void {
    // Without delivery_acks items settled on send; a stray Ack has nothing left to settle.
    if (!this.#deliveryAcks) return;
    const settled = this.#window.remove(ids);
    if (settled.length === 0) return;
    this.#acks.settle(settled.length, this.#ctx.clock.now());
    this.#ctx.buffer.ack(settled);
    this.#ctx.ledger.forget(settled);
    this.#ctx.counters.settled += settled.length;
  }

  #applyConfig(update: ConfigUpdate | undefined): void {
    if (!update) return;
    const { changed, clamped } = applySettingsPatch(this.#ctx.settings, update.config);
    for (const { setting, requested, applied } of clamped) {
      this.#ctx.logger.warn(
        { setting, requested, applied, bounds: SETTINGS_BOUNDS[setting] },
        'gateway config update out of range: clamped',
      );
    }
    if (Object.keys(changed).length > 0) {
      this.#ctx.logger.info(
        { changed, configVersion: update.configVersion },
        'stream settings updated',
      );
      this.#settingsChanged.wake();
    }
    try {
      this.#ctx.onConfigUpdate?.(update);
    } catch (err: unknown) {
      this.#ctx.logger.error({ err }, 'applying the gateway config update failed');
    }
  }

  #onBackpressure(throttle: boolean, delayMs: number): void {
    this.#throttleDelayMs = throttle ? (delayMs > 0 ? delayMs : DEFAULT_THROTTLE_DELAY_MS) : 0;
    this.#ctx.logger.info({ throttle, delayMs: this.#throttleDelayMs }, 'gateway backpressure');
    this.#throttleChanged.wake();
  }

  /**
   * Graceful stop asked by the gateway: stop sending, give outstanding acks a grace period,
   * half-close, and let the stream's reconnect policy decide when to come back.
   */
  async #onShutdown(reason: string): Promise<void> {
    this.#ctx.logger.warn({ reason }, 'gateway requested shutdown');
    this.#draining = true;
    this.#drainStop.abort();
    if (this.#deliveryAcks && this.#window.size > 0) {
      const waitAcks = this.#window.waitUntilEmpty(this.#controller.signal).then(
        () => undefined,
        () => undefined,
      );
      const graceOver = this.#ctx.clock
        .sleep(this.#options.shutdownGraceMs, this.#controller.signal)
        .then(
          () => undefined,
          () => undefined,
        );
      await Promise.race([waitAcks, graceOver]);
    }
    this.#call?.end();
    this.#finish({ kind: 'shutdown', reason: reason || 'no reason given' });
  }

  async #answerQuery(query: ResourceQuery): Promise<void> {
    let result: ResourceQueryResult;
    try {
      result = await this.#ctx.queryHandler(query, this.#controller.signal);
    } catch (err: unknown) {
      this.#ctx.logger.error({ err, queryId: query.queryId }, 'live query failed');
      result = {
        queryId: query.queryId,
        error: { code: QueryErrorCode.QUERY_ERROR_INTERNAL, message: getErrorMessage(err) },
        payload: Buffer.alloc(0),
        continueToken: '',
        remaining: 0,
        truncated: false,
      };
    }
    if (this.#controller.signal.aborted) return;
    const message: AgentMessage = {
      messageId: randomUUID(),
      payload: { $case: 'resourceQueryResult', value: result },
    };
    try {
      await this.#write(AgentMessage.encode(message).finish());
    } catch (err: unknown) {
      this.#finish({
        kind: 'lost',
        reason: `query result: ${getErrorMessage(err)}`,
        accepted: true,
      });
    }
  }

  // ---- agent -> gateway ----

  async #drainLoop(): Promise<void> {
    const signal = AbortSignal.any([this.#controller.signal, this.#drainStop.signal]);
    const { buffer, settings } = this.#ctx;
    while (!signal.aborted) {
      if (this.#deliveryAcks) await this.#window.waitForRoom(settings.batchSize, signal);
      await buffer.waitForItems(signal);
      // After the wait, so a round that finds items is the one that pauses.
      await this.#throttle(signal);
      if (this.#draining) return;
      const room = this.#deliveryAcks
        ? 2 * settings.batchSize - this.#window.size
        : settings.batchSize;
      for (const item of buffer.take(Math.max(1, room))) {
        if (this.#ctx.ledger.charges(item.id) >= this.#options.maxAttempts) {
          this.#giveUp(item.id);
          continue;
        }
        // A session ended on it before: alone, so that its fate names it (AttemptLedger).
        const alone = this.#ctx.ledger.isSuspect(item.id);
        if (alone) await this.#window.waitUntilEmpty(signal);
        await this.#sendItem(item.id, item.payload);
        if (alone) await this.#window.waitUntilEmpty(signal);
      }
    }
  }

  async #sendItem(id: string, payload: Uint8Array): Promise<void> {
    const { buffer, counters, ledger } = this.#ctx;
    if (this.#deliveryAcks) {
      const now = this.#ctx.clock.now();
      this.#window.add(id, now);
      this.#acks.add(1, now);
      this.#workOutstanding();
      await this.#write(payload);
    } else {
      // Without acks, the hand-off to HTTP/2 is the best evidence of delivery we get.
      await this.#write(payload, (err) => {
        if (err) return;
        if (buffer.ack([id]) > 0) {
          ledger.forget([id]);
          counters.settled++;
        }
      });
    }
    counters.sent++;
  }

  #giveUp(id: string): void {
    this.#ctx.buffer.discard([id]);
    this.#ctx.ledger.forget([id]);
    this.#ctx.counters.droppedAttempts++;
    this.#ctx.logger.warn(
      { id, attempts: this.#options.maxAttempts },
      'item dropped after repeated failed deliveries',
    );
  }

  /** Paces drain rounds while the gateway asks for backpressure. */
  async #throttle(signal: AbortSignal): Promise<void> {
    while (this.#throttleDelayMs > 0) {
      if (await this.#throttleChanged.sleep(this.#ctx.clock, this.#throttleDelayMs, signal)) return;
    }
  }

  async #heartbeatLoop(): Promise<void> {
    const signal = this.#controller.signal;
    for (;;) {
      const slept = await this.#settingsChanged.sleep(
        this.#ctx.clock,
        this.#ctx.settings.heartbeatIntervalMs,
        signal,
      );
      if (!slept) continue;
      await this.#write(AgentMessage.encode(this.#heartbeat()).finish());
      this.#ctx.counters.heartbeats++;
      this.#ctx.onHeartbeat?.();
    }
  }

  #heartbeat(): AgentMessage {
    const now = this.#ctx.clock.now();
    return {
      messageId: randomUUID(),
      meta: {
        tenantId: '',
        clusterId: this.#options.identity.clusterId,
        agentId: this.#options.identity.agentId,
        sessionId: '',
        timestamp: String(now),
      },
      payload: {
        $case: 'heartbeat',
        value: { timestampUnixMs: String(now), health: this.#health() },
      },
    };
  }

  #health(): AgentHealth {
    const stats = this.#ctx.buffer.stats();
    const sources = this.#ctx.sourceCounters?.() ?? NO_SOURCE_COUNTS;
    // Items given up after maxAttempts are discarded through the buffer, so its drop counts
    // already include them.
    const dropped = Object.values(stats.dropped).reduce((sum, n) => sum + n, 0);
    return {
      queueDepth: String(stats.pending + stats.inflight),
      droppedMessages: String(dropped),
      status: this.#healthStatus(),
      truncatedLines: String(sources.truncatedLines),
      droppedTooOld: String(sources.droppedTooOld),
      droppedFuture: String(sources.droppedFuture),
      droppedRateLimited: String(sources.droppedRateLimited),
      quarantinedMessages: String(this.#ctx.quarantinedItems?.() ?? 0),
      metricsApi: this.#ctx.metricsApi?.() ?? '',
    };
  }

  #healthStatus(): string {
    if (this.#ctx.isOverloaded()) return 'overloaded';
    if (this.#throttleDelayMs > 0) return 'degraded';
    return 'healthy';
  }

  /**
   * Every flush interval while something is outstanding: returns items whose Ack is overdue to
   * the buffer (charging each one attempt), and ends the session when nothing it waits for has
   * moved for the stall timeout. With nothing sent and unsettled nothing can be overdue or stall,
   * so an idle session arms no timer here until its next write (an idle collector's CPU).
   */
  async #sweepLoop(): Promise<void> {
    const signal = this.#controller.signal;
    for (;;) {
      await this.#untilWorkOutstanding(signal);
      await this.#settingsChanged.sleep(
        this.#ctx.clock,
        this.#ctx.settings.flushIntervalMs,
        signal,
      );
      if (this.#deliveryAcks) this.#redeliverOverdue();
      if (this.#endIfStalled()) return;
    }
  }

  #hasWorkOutstanding(): boolean {
    return this.#window.size > 0 || this.#acks.outstanding > 0 || this.#writes.outstanding > 0;
  }

  /** Resolves at once when work is outstanding, else at the next send or write. */
  #untilWorkOutstanding(signal: AbortSignal): Promise<void> {
    if (this.#hasWorkOutstanding()) return Promise.resolve();
    if (signal.aborted) return Promise.reject(toError(signal.reason));
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#onWorkOutstanding = undefined;
        reject(toError(signal.reason));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#onWorkOutstanding = () => {
        this.#onWorkOutstanding = undefined;
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
    });
  }

  /** A send or a write is outstanding now: wakes the sweep if it waits for one. */
  #workOutstanding(): void {
    this.#onWorkOutstanding?.();
  }

  #redeliverOverdue(): void {
    const overdue = this.#window.expired(this.#ctx.clock.now(), this.#options.redeliveryTimeoutMs);
    if (overdue.length === 0) return;
    this.#window.remove(overdue);
    // Given up on, not progress: a dead session must not look alive because items were returned.
    this.#acks.drop(overdue.length);
    this.#ctx.ledger.charge(overdue);
    this.#ctx.buffer.requeue(overdue);
    this.#ctx.counters.redelivered += overdue.length;
    this.#ctx.logger.warn({ items: overdue.length }, 'no ack in time: items queued for redelivery');
  }

  /**
   * A call can look open long after the gateway is gone (it ended the call without us seeing
   * it, a proxy froze, its server stopped reading while HTTP/2 still answers pings). Work
   * outstanding with no progress for the stall timeout ends the session; teardown returns the
   * unsettled items uncharged (the items are not at fault) and the stream reconnects.
   */
  #endIfStalled(): boolean {
    const { awaitingAck, awaitingWrite, stalledForMs } = this.progress();
    const limitMs = this.#options.stallTimeoutMs;
    if (stalledForMs < limitMs) return false;
    const waiting = [
      awaitingAck > 0 ? `${awaitingAck} items awaiting an ack` : '',
      awaitingWrite > 0 ? `${awaitingWrite} writes the gateway has not read` : '',
    ].filter((part) => part !== '');
    this.#finish({
      kind: 'stalled',
      reason: `no progress from the gateway for ${Math.round(stalledForMs / 1000)} s (${waiting.join(', ')}): the session is dead although the call looks open`,
    });
    return true;
  }

  /**
   * Writes one encoded message, honouring the call's highWaterMark: past it, waits for
   * 'drain' so a slow gateway cannot grow memory without bound.
   */
  async #write(
    bytes: Uint8Array,
    onWritten?: (err: Error | null | undefined) => void,
  ): Promise<void> {
    const call = this.#call;
    const signal = this.#controller.signal;
    if (!call || signal.aborted) throw toError(signal.reason ?? new Error('session ended'));
    this.#writes.add(1, this.#ctx.clock.now());
    this.#workOutstanding();
    const hasRoom = call.write(bytes, (err: Error | null | undefined) => {
      this.#writes.settle(1, this.#ctx.clock.now());
      onWritten?.(err);
    });
    if (!hasRoom) await once(call, 'drain', { signal });
  }
}
