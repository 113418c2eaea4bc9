import { describe, expect, it } from 'vitest';
import { AgentCapabilities, type HandshakeResponse } from '../../proto/index.js';
import { GatewayFatalError } from './errors.js';
import { buildHandshake, evaluateHandshake, handshakeHeaders } from './handshake.js';

const accepted = (overrides: Partial<HandshakeResponse> = {}): HandshakeResponse => ({
  accepted: true,
  sessionId: 's-1',
  serverVersion: 'test',
  rejectionReason: '',
  protoVersion: 'v1',
  supportedProtoVersions: ['v1'],
  deliveryAcks: true,
  acceptedPayloads: [],
  ...overrides,
});

const identity = {
  tenantToken: 'secret',
  agentVersion: '1.2.3',
  clusterId: 'cluster',
  agentId: 'agent',
  capabilities: { logs: true, state: false, metrics: true },
};

describe('handshake', () => {
  it('offers the preferred and every supported version, identity and capabilities', () => {
    const message = buildHandshake(identity);
    expect(message.messageId).not.toBe('');
    expect(message.payload).toEqual({
      $case: 'handshake',
      value: {
        agentVersion: '1.2.3',
        protoVersion: 'v1',
        clusterId: 'cluster',
        tenantToken: 'secret',
        caps: AgentCapabilities.fromPartial({ logs: true, state: false, metrics: true }),
        supportedProtoVersions: ['v1'],
      },
    });
    expect(handshakeHeaders(identity)).toMatchObject({
      'x-tenant-token': 'secret',
      'x-proto-version': 'v1',
      'x-cluster-id': 'cluster',
      'x-agent-id': 'agent',
    });
  });

  it('accepts v1 however it is spelled, and an empty version as v1', () => {
    expect(evaluateHandshake(accepted({ protoVersion: ' V1 ' }))).toMatchObject({
      kind: 'accepted',
      protoVersion: 'v1',
    });
    expect(
      evaluateHandshake(accepted({ protoVersion: '', supportedProtoVersions: [] })),
    ).toMatchObject({ kind: 'accepted', protoVersion: 'v1', deliveryAcks: true });
  });

  it('treats a version it does not speak as fatal', () => {
    expect(() => evaluateHandshake(accepted({ protoVersion: 'v2' }))).toThrow(GatewayFatalError);
    expect(() =>
      evaluateHandshake(accepted({ protoVersion: 'v1', supportedProtoVersions: ['v2', 'v3'] })),
    ).toThrow(/upgrade the agent/);
  });

  it('retries token and cluster rejections, but not a protocol rejection', () => {
    expect(
      evaluateHandshake(accepted({ accepted: false, rejectionReason: ' invalid tenant token ' })),
    ).toEqual({ kind: 'rejected', reason: 'invalid tenant token' });
    expect(evaluateHandshake(accepted({ accepted: false, rejectionReason: '' }))).toEqual({
      kind: 'rejected',
      reason: 'no reason given',
    });
    expect(() =>
      evaluateHandshake(
        accepted({ accepted: false, rejectionReason: 'unsupported proto version v1' }),
      ),
    ).toThrow(expect.objectContaining({ code: 'ERR_GATEWAY_PROTO_VERSION' }) as Error);
  });
});
