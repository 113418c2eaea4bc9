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
import { describeMessage, messageKind } from './describe-message.js';
import type { MessageStore } from './message-store.js';

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
}

/** What the UI and tests see of one agent connection. */
export interface SessionInfo {
  readonly sessionId: string;
  readonly agentId: string;
  readonly clusterId: string;
  readonly agentVersion: string;
  readonly protoVersion: string;
  readonly deliveryAcks: boolean;
  readonly peer: string;
  readonly connectedAt: number;
  readonly lastMessageAt: number;
  readonly received: number;
  readonly duplicates: number;
  readonly acked: number;
  readonly state: 'connected' | 'closed';
  readonly closeReason: string | undefined;
  readonly lastHeartbeat:
    | {
        readonly status: string;
        readonly queueDepth: number;
        readonly droppedMessages: number;
        readonly at: number;
      }
    | undefined;
}

export interface ConnectionHooks {
  readonly logger: Logger;
  readonly store: MessageStore;
  readonly now: () => number;
  readonly onSession: (connection: AgentConnection) => void;
  readonly onMessage: (connection: AgentConnection, message: AgentMessage, isNew: boolean) => void;
  readonly onClosed: (connection: AgentConnection) => void;
}

type Call = ServerDuplexStream<AgentMessage, GatewayMessage>;

const norm = (v: string): string => v.trim().toLowerCase();

/** Picks the newest version both sides speak, or undefined. */
export function negotiateVersion(
  request: HandshakeRequest,
  ours: readonly string[],
): string | undefined {
  const offered = [...request.supportedProtoVersions, request.protoVersion || 'v1'].map(norm);
  return ours.map(norm).find((v) => offered.includes(v));
}

/** One agent's Connect call as seen by the demo gateway. */
export class AgentConnection {
  readonly #call: Call;
  readonly #options: AdmissionOptions;
  readonly #hooks: ConnectionHooks;
  #info: SessionInfo;
  #handshaken = false;
  #pendingAcks: string[] = [];
  #ackScheduled = false;
  readonly #queries = new Map<string, (result: ResourceQueryResult) => void>();

  constructor(call: Call, options: AdmissionOptions, hooks: ConnectionHooks) {
    this.#call = call;
    this.#options = options;
    this.#hooks = hooks;
    const now = hooks.now();
    this.#info = {
      sessionId: randomUUID(),
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
      lastHeartbeat: undefined,
    };
    call.on('data', (message: AgentMessage) => {
      this.#onMessage(message);
    });
    call.on('end', () => {
      this.#close('agent closed the stream');
      call.end();
    });
    call.on('error', (err: Error) => {
      this.#close(err.message);
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
    return true;
  }

  /** Sends a query; resolves with the agent's answer. */
  query(
    payload: Extract<GatewayMessage['payload'], { $case: 'resourceQuery' }>,
  ): Promise<ResourceQueryResult> {
    return new Promise<ResourceQueryResult>((resolve, reject) => {
      this.#queries.set(payload.value.queryId, resolve);
      if (!this.send(payload)) reject(new Error('session closed'));
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
      const resolve = this.#queries.get(payload.value.queryId);
      this.#queries.delete(payload.value.queryId);
      resolve?.(payload.value);
    } else if (this.#info.deliveryAcks) {
      // Acked even when a duplicate: the agent is waiting for it either way.
      this.#queueAck(message.messageId);
    }
  }

  #onHeartbeat(health: AgentHealth | undefined): void {
    this.#update({
      lastHeartbeat: {
        status: health?.status ?? '',
        queueDepth: Number(health?.queueDepth ?? 0),
        droppedMessages: Number(health?.droppedMessages ?? 0),
        at: this.#hooks.now(),
      },
    });
  }

  #store(message: AgentMessage, now: number): boolean {
    return this.#hooks.store.insert({
      messageId: message.messageId,
      sessionId: this.#info.sessionId,
      agentId: this.#info.agentId === '' ? (message.meta?.agentId ?? '') : this.#info.agentId,
      clusterId: this.#info.clusterId,
      kind: messageKind(message),
      receivedAt: now,
      summary: describeMessage(message),
      payload: AgentMessage.encode(message).finish(),
    });
  }

  #onHandshake(message: AgentMessage): void {
    const payload = message.payload;
    if (payload?.$case !== 'handshake') {
      this.abort(status.INVALID_ARGUMENT, 'first message must be handshake');
      return;
    }
    const request = payload.value;
    const header = this.#call.metadata.get('x-tenant-token')[0]?.toString() ?? '';
    const token = request.tenantToken === '' ? header : request.tenantToken;
    this.#update({ clusterId: request.clusterId, agentVersion: request.agentVersion });
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
        },
      },
    });
    this.#hooks.logger.info(
      { sessionId: this.#info.sessionId, clusterId: request.clusterId },
      'agent connected',
    );
    this.#hooks.onSession(this);
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
    this.#update({ state: 'closed', closeReason: reason });
    this.#hooks.onClosed(this);
  }
}
