import { randomUUID } from 'node:crypto';
import { status, type ServerDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  AgentMessage,
  type AgentHealth,
  type ConfigSnapshot,
  type GatewayMessage,
  type HandshakeRequest,
  type ResourceQueryResult,
} from '../proto/index.js';
import type { ControlKind, HeartbeatView, SessionInfo } from './api-types.js';
import { describeControl } from './describe-control.js';
import { describeMessage, messageKind } from './describe-message.js';
import { logLinesOf, rateLimitMarker } from './log-lines.js';
import type { MessageStore } from './message-store.js';
import { normalizeProtoVersion } from '../shared/version.js';

export const DEMO_SERVER_VERSION = 'kubexa-demo-gateway';

/** How the demo gateway treats agents; every field is optional. */
export interface AdmissionOptions {
  /** When set, only this tenant token is accepted. */
  readonly acceptToken?: string;
  /**
   * How a wrong token is refused: `reject` answers the handshake with accepted=false then ends
   * with PERMISSION_DENIED (the Go dev server's way, retried by agents); `unauthenticated`
   * ends the call with UNAUTHENTICATED (fatal for agents).
   */
  readonly tokenFailure?: 'reject' | 'unauthenticated';
  /** When set, other cluster ids are rejected as unknown. */
  readonly knownClusters?: readonly string[];
  /** Newest first. */
  readonly supportedProtoVersions?: readonly string[];
  /** Settle on Ack (true, the default) or let agents settle on send. */
  readonly deliveryAcks?: boolean;
  /** Hold acks until ackHeld() is called, to exercise redelivery. */
  readonly holdAcks?: boolean;
  /** Sent in the handshake reply. */
  readonly initialConfig?: ConfigSnapshot;
  /**
   * The handshake's accepted_payloads: new payload kinds this gateway decodes ("kube_event",
   * "pod_lifecycle"); none by default, as a gateway that predates them.
   */
  readonly acceptedPayloads?: readonly string[];
  /**
   * Index every log line for the Logs view (true, the default). Benchmarks of the agent turn it
   * off: the messages are still stored and deduplicated, but the per-line rows cost the gateway
   * more CPU than the agent spends on the same lines, on the same cores.
   */
  readonly indexLogLines?: boolean;
  /**
   * Store each log batch (true, the default). A benchmark that times something else beside the
   * agent's log load turns it off, so that the stand-in gateway's storage does not hold the
   * process it times in: a log batch is then still received, deduplicated by its message_id (an
   * in-memory set of ids, about 100 bytes each, growing with the run), counted in the session,
   * acked (every copy, as when stored) and emitted as `message`, but it is not re-encoded,
   * described nor inserted, and the Logs and Messages views do not show it. Every other kind is
   * stored as always. console-round-trip measured the storage at 43 % of the gateway process's
   * busy time under 60,000 lines/s (docs/consoles.md).
   */
  readonly storeLogBatches?: boolean;
}

export type { SessionInfo } from './api-types.js';

export interface ConnectionHooks {
  readonly logger: Logger;
  readonly store: MessageStore;
  readonly now: () => number;
  readonly onSession: (connection: AgentConnection) => void;
  readonly onMessage: (connection: AgentConnection, message: AgentMessage, isNew: boolean) => void;
  readonly onClosed: (connection: AgentConnection) => void;
}

type Call = ServerDuplexStream<AgentMessage, GatewayMessage>;

/** Picks the newest version both sides speak, or undefined. */
export function negotiateVersion(
  request: HandshakeRequest,
  ours: readonly string[],
): string | undefined {
  const offered = [...request.supportedProtoVersions, request.protoVersion || 'v1'].map(
    normalizeProtoVersion,
  );
  return ours.map(normalizeProtoVersion).find((v) => offered.includes(v));
}

/** What a heartbeat's health says, counters as numbers. */
function heartbeatView(health: AgentHealth | undefined, at: number): HeartbeatView {
  if (!health) {
    return {
      status: '',
      queueDepth: 0,
      droppedMessages: 0,
      truncatedLines: 0,
      droppedRateLimited: 0,
      metricsApi: '',
      at,
    };
  }
  return {
    status: health.status,
    queueDepth: Number(health.queueDepth),
    droppedMessages: Number(health.droppedMessages),
    truncatedLines: Number(health.truncatedLines),
    droppedRateLimited: Number(health.droppedRateLimited),
    metricsApi: health.metricsApi,
    at,
  };
}

/**
 * The agent's identity from its handshake: the message's metadata names the agent (the Go
 * agent's way, which sends no x-agent-id header); the header is only a fallback.
 */
function identityOf(
  message: AgentMessage,
  request: HandshakeRequest,
  headerAgentId: string,
): Pick<SessionInfo, 'agentId' | 'clusterId' | 'agentVersion'> {
  const meta = message.meta;
  return {
    agentId: meta && meta.agentId !== '' ? meta.agentId : headerAgentId,
    clusterId: request.clusterId !== '' ? request.clusterId : (meta?.clusterId ?? ''),
    agentVersion: request.agentVersion,
  };
}

/** One agent's Connect call as seen by the demo gateway. */
/** The handshake's pod_consoles flag (absent in a Go agent's handshake: false). */
function advertisesConsoles(request: HandshakeRequest): boolean {
  return request.caps?.podConsoles === true;
}

/** The handshake's node_consoles flag (absent: false). */
function advertisesNodeConsoles(request: HandshakeRequest): boolean {
  return request.caps?.nodeConsoles === true;
}

export class AgentConnection {
  readonly #call: Call;
  readonly #options: AdmissionOptions;
  readonly #hooks: ConnectionHooks;
  #info: SessionInfo;
  #handshaken = false;
  /** The agent advertised pod_consoles: only then is it sent console requests. */
  podConsoles = false;
  /** The agent advertised node_jobs / mutations: only then is it sent those requests. */
  nodeJobs = false;
  mutations = false;
  /** The agent advertised node_consoles (exec.node on in its executor). */
  nodeConsoles = false;
  #pendingAcks: string[] = [];
  #ackScheduled = false;
  readonly #queries = new Map<
    string,
    { resolve: (result: ResourceQueryResult) => void; reject: (err: Error) => void }
  >();

  constructor(call: Call, options: AdmissionOptions, hooks: ConnectionHooks) {
    this.#call = call;
    this.#options = options;
    this.#hooks = hooks;
    const now = hooks.now();
    this.#info = {
      sessionId: randomUUID(),
      // Until the handshake names it: the Go agent sends no x-agent-id header.
      agentId: call.metadata.get('x-agent-id')[0]?.toString() ?? '',
      clusterId: '',
      agentVersion: '',
      protoVersion: '',
      deliveryAcks: options.deliveryAcks ?? true,
      peer: call.getPeer(),
      connectedAt: now,
      lastMessageAt: now,
      received: 0,
      duplicates: 0,
      acked: 0,
      state: 'connected',
      closeReason: undefined,
      heartbeatIntervalMs:
        options.initialConfig && options.initialConfig.heartbeatIntervalSec > 0
          ? options.initialConfig.heartbeatIntervalSec * 1000
          : undefined,
      lastHeartbeat: undefined,
      throttle: undefined,
    };
    call.on('data', (message: AgentMessage) => {
      this.#onMessage(message);
    });
    call.on('end', () => {
      this.#close('agent closed the stream');
      call.end();
    });
    // abort() emits a plain { code, details } status, not an Error.
    call.on('error', (err: Partial<Error> & { details?: string }) => {
      this.#close(err.message ?? err.details ?? 'stream error');
    });
    call.on('cancelled', () => {
      this.#close('cancelled');
    });
  }

  get info(): SessionInfo {
    return this.#info;
  }

  /** Sends a gateway message; false once the stream is closed. */
  send(payload: NonNullable<GatewayMessage['payload']>): boolean {
    if (this.#info.state === 'closed') return false;
    this.#call.write({ messageId: randomUUID(), payload });
    this.#onSent(payload);
    return true;
  }

  /** Control messages go to the timeline; backpressure and config change what the UI shows. */
  #onSent(payload: NonNullable<GatewayMessage['payload']>): void {
    if (payload.$case === 'ack' || payload.$case === 'handshake') return;
    const now = this.#hooks.now();
    if (payload.$case === 'backpressure') {
      const { throttle, delayMs } = payload.value;
      this.#update({
        throttle: throttle ? { since: this.#info.throttle?.since ?? now, delayMs } : undefined,
      });
    } else if (payload.$case === 'config') {
      const seconds = payload.value.config?.heartbeatIntervalSec ?? 0;
      if (seconds > 0) this.#update({ heartbeatIntervalMs: seconds * 1000 });
    }
    const kind: ControlKind = payload.$case === 'resourceQuery' ? 'query' : payload.$case;
    this.#timeline(kind, true, describeControl(payload));
  }

  #timeline(kind: ControlKind, outbound: boolean, detail: string): void {
    this.#hooks.store.recordControl(this.#info.sessionId, {
      at: this.#hooks.now(),
      kind,
      outbound,
      detail,
    });
  }

  /** Sends a query; resolves with the agent's answer. */
  query(
    payload: Extract<GatewayMessage['payload'], { $case: 'resourceQuery' }>,
  ): Promise<ResourceQueryResult> {
    return new Promise<ResourceQueryResult>((resolve, reject) => {
      this.#queries.set(payload.value.queryId, { resolve, reject });
      if (!this.send(payload)) {
        this.#queries.delete(payload.value.queryId);
        reject(new Error('session closed'));
      }
    });
  }

  /** Sends the acks held back by `holdAcks`. */
  releaseAcks(): number {
    const count = this.#pendingAcks.length;
    this.#flushAcks();
    return count;
  }

  /** Drops the held acks as if they were lost. */
  forgetAcks(): number {
    return this.#pendingAcks.splice(0).length;
  }

  /** Ends the call from the gateway side with a status (a crash or a policy decision). */
  abort(code: status, details: string): void {
    if (this.#info.state === 'closed') return;
    this.#call.emit('error', { code, details });
    this.#close(details);
  }

  #update(patch: Partial<SessionInfo>): void {
    this.#info = { ...this.#info, ...patch };
  }

  #onMessage(message: AgentMessage): void {
    const now = this.#hooks.now();
    if (!this.#handshaken) {
      this.#onHandshake(message);
      return;
    }
    const isNew = this.#store(message, now);
    this.#update({
      received: this.#info.received + 1,
      duplicates: this.#info.duplicates + (isNew ? 0 : 1),
      lastMessageAt: now,
    });
    this.#react(message);
    this.#hooks.onMessage(this, message, isNew);
  }

  /** Heartbeats update the health shown; query results settle their query; data is acked. */
  #react(message: AgentMessage): void {
    const payload = message.payload;
    if (payload?.$case === 'heartbeat') {
      this.#onHeartbeat(payload.value.health);
    } else if (payload?.$case === 'resourceQueryResult') {
      const pending = this.#queries.get(payload.value.queryId);
      this.#queries.delete(payload.value.queryId);
      pending?.resolve(payload.value);
    } else if (this.#info.deliveryAcks) {
      // Acked even when a duplicate: the agent is waiting for it either way.
      this.#queueAck(message.messageId);
    }
  }

  #onHeartbeat(health: AgentHealth | undefined): void {
    const previous = this.#info.lastHeartbeat;
    const next = heartbeatView(health, this.#hooks.now());
    this.#update({ lastHeartbeat: next });
    if (previous?.status !== next.status) {
      this.#timeline('heartbeat-status', false, `agent reports ${next.status || 'no status'}`);
    }
  }

  #store(message: AgentMessage, now: number): boolean {
    const context = { sessionId: this.#info.sessionId, receivedAt: now };
    const payload = message.payload;
    if (payload?.$case === 'logs' && this.#options.storeLogBatches === false) {
      return this.#hooks.store.receiveUnstored(message.messageId);
    }
    const lines =
      payload?.$case === 'logs'
        ? this.#options.indexLogLines === false
          ? []
          : logLinesOf(payload.value, context)
        : payload?.$case === 'heartbeat'
          ? rateLimitMarker(this.#info.lastHeartbeat, payload.value.health, context)
          : [];
    return this.#hooks.store.insert(
      {
        messageId: message.messageId,
        sessionId: this.#info.sessionId,
        agentId: this.#info.agentId === '' ? (message.meta?.agentId ?? '') : this.#info.agentId,
        clusterId: this.#info.clusterId,
        kind: messageKind(message),
        receivedAt: now,
        summary: describeMessage(message),
        payload: AgentMessage.encode(withoutCredentials(message)).finish(),
      },
      lines,
    );
  }

  #onHandshake(message: AgentMessage): void {
    const payload = message.payload;
    if (payload?.$case !== 'handshake') {
      this.abort(status.INVALID_ARGUMENT, 'first message must be handshake');
      return;
    }
    const request = payload.value;
    this.podConsoles = advertisesConsoles(request);
    this.#adoptWriteCapabilities(request);
    this.nodeConsoles = advertisesNodeConsoles(request);
    const header = this.#call.metadata.get('x-tenant-token')[0]?.toString() ?? '';
    const token = request.tenantToken === '' ? header : request.tenantToken;
    this.#update(identityOf(message, request, this.#info.agentId));
    const refusal = this.#refusal(request, token);
    if (refusal) {
      if (refusal.unauthenticated) {
        this.abort(status.UNAUTHENTICATED, refusal.reason);
        return;
      }
      this.#call.write({
        messageId: randomUUID(),
        payload: {
          $case: 'handshake',
          value: {
            accepted: false,
            sessionId: '',
            serverVersion: DEMO_SERVER_VERSION,
            rejectionReason: refusal.reason,
            protoVersion: '',
            supportedProtoVersions: [...(this.#options.supportedProtoVersions ?? ['v1'])],
            deliveryAcks: false,
            acceptedPayloads: [],
          },
        },
      });
      this.abort(refusal.code, refusal.reason);
      return;
    }
    const version =
      negotiateVersion(request, this.#options.supportedProtoVersions ?? ['v1']) ?? 'v1';
    this.#handshaken = true;
    this.#update({ protoVersion: version });
    this.#store(message, this.#hooks.now());
    this.#call.write({
      messageId: randomUUID(),
      payload: {
        $case: 'handshake',
        value: {
          accepted: true,
          sessionId: this.#info.sessionId,
          serverVersion: DEMO_SERVER_VERSION,
          rejectionReason: '',
          config: this.#options.initialConfig,
          protoVersion: version,
          supportedProtoVersions: [...(this.#options.supportedProtoVersions ?? ['v1'])],
          deliveryAcks: this.#info.deliveryAcks,
          acceptedPayloads: acceptedPayloadsOf(this.#options),
        },
      },
    });
    this.#timeline('handshake', false, `agent ${request.agentVersion} proto ${version}`);
    this.#hooks.logger.info(
      {
        sessionId: this.#info.sessionId,
        clusterId: this.#info.clusterId,
        agentId: this.#info.agentId,
      },
      'agent connected',
    );
    this.#hooks.onSession(this);
  }

  /** node_jobs and mutations as the handshake advertised them (absent in a Go agent's: false). */
  #adoptWriteCapabilities(request: HandshakeRequest): void {
    this.nodeJobs = request.caps?.nodeJobs === true;
    this.mutations = request.caps?.mutations === true;
  }

  #refusal(
    request: HandshakeRequest,
    token: string,
  ): { reason: string; code: status; unauthenticated: boolean } | undefined {
    const wanted = this.#options.acceptToken;
    if (wanted !== undefined && token !== wanted) {
      return {
        reason: token === '' ? 'missing tenant_token' : 'invalid tenant token',
        code: status.PERMISSION_DENIED,
        unauthenticated: this.#options.tokenFailure === 'unauthenticated',
      };
    }
    const known = this.#options.knownClusters;
    if (known && !known.includes(request.clusterId)) {
      return {
        reason: `unknown cluster ${request.clusterId}`,
        code: status.PERMISSION_DENIED,
        unauthenticated: false,
      };
    }
    if (negotiateVersion(request, this.#options.supportedProtoVersions ?? ['v1']) === undefined) {
      return {
        reason: `unsupported proto version ${request.protoVersion}`,
        code: status.FAILED_PRECONDITION,
        unauthenticated: false,
      };
    }
    return undefined;
  }

  /** Acks arriving in one tick go out as one Ack message. */
  #queueAck(id: string): void {
    this.#pendingAcks.push(id);
    if (this.#options.holdAcks === true || this.#ackScheduled) return;
    this.#ackScheduled = true;
    setImmediate(() => {
      this.#ackScheduled = false;
      this.#flushAcks();
    });
  }

  #flushAcks(): void {
    const ids = this.#pendingAcks.splice(0);
    if (ids.length === 0) return;
    if (this.send({ $case: 'ack', value: { messageIds: ids } })) {
      this.#update({ acked: this.#info.acked + ids.length });
    }
  }

  #close(reason: string): void {
    if (this.#info.state === 'closed') return;
    const wasAdmitted = this.#handshaken;
    this.#update({ state: 'closed', closeReason: reason, throttle: undefined });
    // A query the session can no longer answer fails now instead of waiting forever.
    for (const pending of this.#queries.values()) {
      pending.reject(new Error(`session closed before the answer: ${reason}`));
    }
    this.#queries.clear();
    if (wasAdmitted) this.#timeline('closed', false, reason);
    this.#hooks.onClosed(this);
  }
}

/** The handshake's accepted_payloads (none unless configured). */
function acceptedPayloadsOf(options: AdmissionOptions): string[] {
  return [...(options.acceptedPayloads ?? [])];
}

/** The message as stored: a handshake's tenant token never reaches the store or its file. */
function withoutCredentials(message: AgentMessage): AgentMessage {
  const payload = message.payload;
  if (payload?.$case !== 'handshake' || payload.value.tenantToken === '') return message;
  return {
    ...message,
    payload: { $case: 'handshake', value: { ...payload.value, tenantToken: '' } },
  };
}
