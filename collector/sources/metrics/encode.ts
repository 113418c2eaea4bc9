// Wraps one metrics payload in an AgentMessage and a buffer item. Every metrics message is its
// own item (as the Go agent sends one AgentMessage per event), of the buffer's `metric` kind.
import { randomUUID } from 'node:crypto';
import { AgentMessage } from '../../../proto/index.js';
import type { BufferItem } from '../../buffer/types.js';

export interface MessageIdentity {
  readonly clusterId: string;
  readonly agentId: string;
}

export type MetricsPayload = NonNullable<AgentMessage['payload']>;

export function metricsItem(
  identity: MessageIdentity,
  timestampMs: number,
  payload: MetricsPayload,
): BufferItem {
  const id = randomUUID();
  const message: AgentMessage = {
    messageId: id,
    meta: {
      tenantId: '',
      clusterId: identity.clusterId,
      agentId: identity.agentId,
      sessionId: '',
      timestamp: String(Math.trunc(timestampMs)),
    },
    payload,
  };
  return { id, kind: 'metric', payload: AgentMessage.encode(message).finish() };
}
