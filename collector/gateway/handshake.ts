import { randomUUID } from 'node:crypto';
import {
  AgentCapabilities,
  type AgentMessage,
  type ConfigSnapshot,
  type HandshakeResponse,
} from '../../proto/index.js';
import { GatewayFatalError } from './errors.js';
import { normalizeProtoVersion } from '../../shared/version.js';

/** Protocol versions this agent speaks, newest first. */
export const SUPPORTED_PROTO_VERSIONS: readonly string[] = ['v1'];

/** Who this agent is, as told to the gateway in the first message of every session. */
export interface AgentIdentity {
  /** Secret: sent in the handshake and the x-tenant-token header, never logged. */
  readonly tenantToken: string;
  readonly agentVersion: string;
  /** UID of the kube-system namespace. */
  readonly clusterId: string;
  readonly agentId: string;
  /** Flags left out are false: a payload kind is advertised only by what produces it. */
  readonly capabilities: Readonly<Partial<AgentCapabilities>> & {
    readonly logs: boolean;
    readonly state: boolean;
    readonly metrics: boolean;
    readonly podLifecycleEvents?: boolean;
    readonly kubeEvents?: boolean;
    /** Pod consoles: the executor has exec.pod on (it said so over its socket). */
    readonly podConsoles?: boolean;
    /** Node consoles: the executor has exec.node on. */
    readonly nodeConsoles?: boolean;
    /** Cluster profiles (AgentMessage.profile); absent: false. */
    readonly profiles?: boolean;
  };
}

export function buildHandshake(identity: AgentIdentity): AgentMessage {
  return {
    messageId: randomUUID(),
    payload: {
      $case: 'handshake',
      value: {
        agentVersion: identity.agentVersion,
        protoVersion: SUPPORTED_PROTO_VERSIONS[0] ?? 'v1',
        clusterId: identity.clusterId,
        tenantToken: identity.tenantToken,
        // fromPartial: a capability this process does not set is false.
        caps: AgentCapabilities.fromPartial(identity.capabilities),
        supportedProtoVersions: [...SUPPORTED_PROTO_VERSIONS],
      },
    },
  };
}

/** Metadata sent with the Connect call (the Go agent's headers plus x-agent-id). */
export function handshakeHeaders(identity: AgentIdentity): Record<string, string> {
  return {
    'x-tenant-token': identity.tenantToken,
    'x-agent-version': identity.agentVersion,
    'x-proto-version': SUPPORTED_PROTO_VERSIONS[0] ?? 'v1',
    'x-cluster-id': identity.clusterId,
    'x-agent-id': identity.agentId,
  };
}

export type HandshakeOutcome =
  | {
      readonly kind: 'accepted';
      readonly sessionId: string;
      readonly protoVersion: string;
      readonly deliveryAcks: boolean;
      readonly config: ConfigSnapshot | undefined;
      /** Payload kinds this gateway opted into (HandshakeResponse.accepted_payloads). */
      readonly acceptedPayloads: readonly string[];
    }
  /** A token or cluster the gateway does not know (yet): retried with backoff. */
  | { readonly kind: 'rejected'; readonly reason: string };

/**
 * Judges the gateway's answer. A rejection is retried (a rotated token or a cluster being
 * registered fixes itself), except a protocol mismatch, which no retry can fix: that throws
 * GatewayFatalError.
 */
export function evaluateHandshake(response: HandshakeResponse): HandshakeOutcome {
  if (!response.accepted) {
    const reason = response.rejectionReason.trim() || 'no reason given';
    if (/proto(col)?[ _-]?version/i.test(reason)) {
      throw new GatewayFatalError(
        'ERR_GATEWAY_PROTO_VERSION',
        `the gateway rejected our protocol version (${reason}); this agent speaks ${SUPPORTED_PROTO_VERSIONS.join(', ')}: upgrade the agent`,
      );
    }
    return { kind: 'rejected', reason };
  }
  const ours = SUPPORTED_PROTO_VERSIONS.map(normalizeProtoVersion);
  const negotiated = normalizeProtoVersion(response.protoVersion) || 'v1';
  const theirs = response.supportedProtoVersions.map(normalizeProtoVersion).filter((v) => v !== '');
  const overlap = theirs.length === 0 || theirs.some((v) => ours.includes(v));
  if (!ours.includes(negotiated) || !overlap) {
    throw new GatewayFatalError(
      'ERR_GATEWAY_PROTO_VERSION',
      `the gateway negotiated protocol "${response.protoVersion}" (it supports ${theirs.join(', ') || 'nothing listed'}) but this agent speaks ${SUPPORTED_PROTO_VERSIONS.join(', ')}: upgrade the agent`,
    );
  }
  return {
    kind: 'accepted',
    sessionId: response.sessionId,
    protoVersion: negotiated,
    deliveryAcks: response.deliveryAcks,
    config: response.config,
    acceptedPayloads: response.acceptedPayloads.map((kind) => kind.trim()).filter((k) => k !== ''),
  };
}
